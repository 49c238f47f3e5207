//! Shared memory: the one place of the live engine that touches raw memory.
//!
//! A [`SharedRam`] is a host's RAM as a memfd, mapped whole into the daemon (sparse: a page
//! takes memory only once written); [`Mapping`] is a window of such a file mapped into a
//! program, which is what a SISCI map hands out as a pointer. Both are `MAP_SHARED`, so a
//! device model's DMA into host RAM (a copy into the daemon's mapping) is what the program
//! then reads through its own mapping, and a program's store is what the device reads.
//!
//! Memory is committed lazily and given back: a page of a memory file takes memory only
//! once written, and zeroing whole pages punches them out of the file
//! (`fallocate(PUNCH_HOLE)`), which frees them in every process that maps them — so a
//! segment's creation costs no zero-fill and its removal returns what it used.
//!
//! Programs in other processes write these pages at any time. Copies in and out are plain
//! byte copies of shared memory: a copy racing a store may see part of it, as a DMA engine
//! racing a CPU store does; it never reads or writes outside the mapping.

#![allow(unsafe_code)]

use rustix::fs::{fallocate, fstat, ftruncate, memfd_create, FallocateFlags, MemfdFlags};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use smartio_platform::HostMemory;
use std::ffi::c_void;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Why shared memory could not be made or mapped.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// memfd_create or ftruncate failed.
    #[error("cannot create shared memory {name} of {size} bytes: {source}")]
    Create {
        /// The memfd's name.
        name: String,
        /// Its size.
        size: u64,
        /// The system's answer.
        source: rustix::io::Errno,
    },
    /// mmap failed.
    #[error("cannot map {len} bytes at offset {offset:#x} of shared memory: {source}")]
    Map {
        /// Offset in the file.
        offset: u64,
        /// Bytes.
        len: u64,
        /// The system's answer.
        source: rustix::io::Errno,
    },
}

/// A shared mapping of `len` bytes of a memory file.
///
/// Invariant: `ptr..ptr + len` is mapped readable and writable for the value's whole life
/// (it is unmapped on drop and never handed out as a Rust reference).
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is an address range valid until drop; the methods only copy through
// it (no references into it), so moving it to or using it from another thread is as sound
// as from the thread that made it.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` permits only copies in and out.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from `offset` (a multiple of the page size), shared.
    pub fn new(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<Mapping, ShmError> {
        let error = |source| ShmError::Map {
            offset,
            len,
            source,
        };
        let size = usize::try_from(len).map_err(|_| error(rustix::io::Errno::NOMEM))?;
        if size == 0 {
            return Err(error(rustix::io::Errno::INVAL));
        }
        // SAFETY: a new mapping at an address the kernel chooses aliases no Rust object.
        let ptr = unsafe {
            mmap(
                std::ptr::null_mut(),
                size,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::NORESERVE,
                fd,
                offset,
            )
        }
        .map_err(error)?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(error(rustix::io::Errno::NOMEM))?;
        Ok(Mapping { ptr, len: size })
    }

    /// Maps `len` bytes of `fd` from `offset` at exactly `at`, replacing the pages there
    /// (SISCI's registered user memory: the program's buffer becomes the segment's memory).
    ///
    /// # Safety
    /// `at..at + len` is page-aligned memory of this process that the caller owns and that
    /// no Rust reference points into; its previous contents are lost (copy them first).
    pub unsafe fn over(
        fd: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        at: *mut u8,
    ) -> Result<Mapping, ShmError> {
        let error = |source| ShmError::Map {
            offset,
            len,
            source,
        };
        let size = usize::try_from(len).map_err(|_| error(rustix::io::Errno::NOMEM))?;
        // SAFETY: the caller gives the range up to this mapping.
        let ptr = unsafe {
            mmap(
                at.cast::<c_void>(),
                size,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                offset,
            )
        }
        .map_err(error)?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(error(rustix::io::Errno::NOMEM))?;
        Ok(Mapping { ptr, len: size })
    }

    /// Gives the range back to the process as private memory holding what the mapping holds
    /// now (the end of registered user memory: the buffer stays the program's).
    pub fn into_private(self) -> Result<(), ShmError> {
        let (at, len) = (self.ptr.as_ptr(), self.len);
        let mut copy = vec![0u8; len];
        self.read(0, &mut copy);
        // From here the range is not this value's to unmap: on success it is private memory,
        // on failure it stays the shared memory it was, which the program can still use.
        std::mem::forget(self);
        // SAFETY: the range was this mapping's own; replacing it with anonymous memory ends
        // the shared mapping.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                at.cast::<c_void>(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::FIXED,
            )
        }
        .map_err(|source| ShmError::Map {
            offset: 0,
            len: len as u64,
            source,
        })?;
        // SAFETY: the new private mapping covers the same range, `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(copy.as_ptr(), ptr.cast::<u8>(), len) };
        Ok(())
    }

    /// The first byte: what a C program gets as the map's address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: a mapping holds at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start and length of `offset..offset + len` within the mapping.
    ///
    /// # Panics
    /// If the range does not lie within the mapping (the caller routed it here: a bug).
    fn span(&self, offset: u64, len: usize) -> usize {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        assert!(
            start <= self.len && len <= self.len - start,
            "emulator bug: {len} bytes at {offset:#x} outside shared memory of {} bytes",
            self.len
        );
        start
    }

    /// Copies bytes out.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let start = self.span(offset, buf.len());
        // SAFETY: `span` checked the range lies within the live mapping; `buf` is a distinct
        // Rust allocation, so the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(start), buf.as_mut_ptr(), buf.len())
        }
    }

    /// Copies bytes in.
    pub fn write(&self, offset: u64, data: &[u8]) {
        let start = self.span(offset, data.len());
        // SAFETY: as in `read`.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(start), data.len())
        }
    }

    /// The dword at `offset` (a multiple of 4), read atomically: a program's store is seen
    /// whole or not at all.
    pub fn load_u32(&self, offset: u64) -> u32 {
        self.dword(offset).load(Ordering::SeqCst)
    }

    /// Replaces the dword at `offset` (a multiple of 4) with `new` if it still holds
    /// `current`; `false` when a program stored something else meanwhile (which wins).
    pub fn replace_u32(&self, offset: u64, current: u32, new: u32) -> bool {
        self.dword(offset)
            .compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn dword(&self, offset: u64) -> &AtomicU32 {
        assert!(
            offset.is_multiple_of(4),
            "emulator bug: a dword at {offset:#x}"
        );
        let start = self.span(offset, 4);
        // SAFETY: `span` checked the four bytes lie within the live mapping, which starts on
        // a page boundary, so they are 4-byte aligned; shared memory is only ever accessed
        // through copies and these atomics, never through a Rust reference to plain data.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(start).cast::<u32>()) }
    }

    /// Zeroes bytes.
    pub fn zero(&self, offset: u64, len: u64) {
        let n = usize::try_from(len).unwrap_or(usize::MAX);
        let start = self.span(offset, n);
        // SAFETY: as in `read`.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(start), 0, n) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this address and length, and no
        // reference into it outlives the value. A failure leaves it mapped: nothing to do.
        let _ = unsafe { munmap(self.ptr.as_ptr().cast::<c_void>(), self.len) };
    }
}

/// A host's RAM: a memfd as large as the host's highest RAM address, mapped whole. Its
/// offsets are the host's physical addresses (the MMIO hole between RAM ranges is never
/// written, so it takes no memory).
#[derive(Debug)]
pub struct SharedRam {
    fd: OwnedFd,
    map: Mapping,
}

impl SharedRam {
    /// RAM of `size` bytes of physical address space, named `name` (seen in
    /// /proc/PID/maps).
    pub fn new(name: &str, size: u64) -> Result<SharedRam, ShmError> {
        let error = |source| ShmError::Create {
            name: name.to_string(),
            size,
            source,
        };
        let fd = memfd_create(name, MemfdFlags::CLOEXEC).map_err(error)?;
        ftruncate(&fd, size).map_err(error)?;
        let map = Mapping::new(fd.as_fd(), 0, size)?;
        Ok(SharedRam { fd, map })
    }

    /// The memory file, to pass to a program.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Another descriptor of the memory file (for the daemon to keep while the engine owns
    /// the RAM).
    pub fn file(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// Bytes of physical address space.
    pub fn size(&self) -> u64 {
        self.map.len() as u64
    }

    /// Bytes of the memory file that take memory: the pages written and not given back.
    pub fn committed(&self) -> u64 {
        committed(self.fd.as_fd())
    }
}

/// The page the memory files are punched in.
const PAGE: u64 = 4096;

/// Bytes of the memory file `fd` that take memory (its allocated blocks).
pub fn committed(fd: BorrowedFd<'_>) -> u64 {
    // st_blocks counts 512-byte units whatever the file system's block size.
    fstat(fd).map_or(0, |st| (st.st_blocks as u64).saturating_mul(512))
}

/// Zeroes `len` bytes of `map` (a mapping of all of `fd` from offset 0) from `offset`: the
/// whole pages among them are punched out of the file — they read as zeroes and take no
/// memory until written again — and the partial pages at either end are zeroed by stores.
/// Where punching is refused (a file system without holes) every byte is stored.
fn zero_file(fd: BorrowedFd<'_>, map: &Mapping, offset: u64, len: u64) {
    let end = offset.saturating_add(len);
    let (first, last) = (offset.next_multiple_of(PAGE), end - end % PAGE);
    if first >= last {
        map.zero(offset, len);
        return;
    }
    let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    if fallocate(fd, punch, first, last - first).is_err() {
        map.zero(offset, len);
        return;
    }
    map.zero(offset, first - offset);
    map.zero(last, end - last);
}

impl HostMemory for SharedRam {
    fn read(&self, offset: u64, buf: &mut [u8]) {
        self.map.read(offset, buf)
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        self.map.write(offset, data)
    }

    fn zero(&mut self, offset: u64, len: u64) {
        zero_file(self.fd.as_fd(), &self.map, offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_mappings_of_one_file_see_each_others_bytes() {
        let mut ram = SharedRam::new("test-ram", 1 << 30).expect("memfd");
        ram.write(0x1234_0000, b"written by a device");
        let program = Mapping::new(ram.fd(), 0x1234_0000, 0x1_0000).expect("maps");
        let mut seen = [0u8; 19];
        program.read(0, &mut seen);
        assert_eq!(&seen, b"written by a device");
        program.write(0x100, b"a store");
        let mut back = [0u8; 7];
        ram.read(0x1234_0100, &mut back);
        assert_eq!(&back, b"a store");
        ram.zero(0x1234_0000, 0x200);
        program.read(0, &mut seen);
        assert_eq!(seen, [0u8; 19]);
    }

    #[test]
    fn zeroed_pages_are_given_back_and_read_as_zeroes_in_every_mapping() {
        let mut ram = SharedRam::new("punched", 1 << 30).expect("memfd");
        assert_eq!(
            ram.committed(),
            0,
            "nothing is committed before it is written"
        );
        let program = Mapping::new(ram.fd(), 0, 1 << 30).expect("maps");
        let bytes = vec![0xa5u8; 8 << 20];
        program.write(0x10_0000, &bytes);
        assert!(ram.committed() >= 8 << 20, "{}", ram.committed());
        // Zero from the middle of a page to the middle of another: the whole pages go back,
        // the partial ones are stored to.
        ram.zero(0x10_0800, (8 << 20) - 0x1000);
        assert!(ram.committed() <= 2 * PAGE, "{}", ram.committed());
        let mut seen = vec![0xffu8; 8 << 20];
        program.read(0x10_0000, &mut seen);
        assert_eq!(&seen[..0x800], &bytes[..0x800], "the bytes before are kept");
        assert!(seen[0x800..(8 << 20) - 0x800].iter().all(|b| *b == 0));
        assert_eq!(
            &seen[(8 << 20) - 0x800..],
            &bytes[..0x800],
            "the bytes after are kept"
        );
    }

    #[test]
    fn zeroing_a_huge_untouched_range_commits_nothing() {
        let mut ram = SharedRam::new("huge", 64 << 30).expect("memfd");
        ram.zero(0x1_0000_0000, 40 << 30);
        assert_eq!(ram.committed(), 0);
        let mut b = [1u8; 16];
        ram.read(0x1_0000_0000 + (20 << 30), &mut b);
        assert_eq!(b, [0u8; 16]);
    }

    /// Lines of this process's memory maps that name the memory file `name`.
    fn maps_of(name: &str) -> usize {
        std::fs::read_to_string("/proc/self/maps")
            .expect("the process's maps")
            .lines()
            .filter(|l| l.contains(name))
            .count()
    }

    #[test]
    fn a_mapping_is_as_long_as_asked_and_goes_from_the_process_when_dropped() {
        let name = format!("smartio-test-dropped-{}", std::process::id());
        let ram = SharedRam::new(&name, 1 << 30).expect("memfd");
        assert_eq!(ram.size(), 1 << 30);
        assert_eq!(maps_of(&name), 1, "the RAM's own mapping");
        let program = Mapping::new(ram.fd(), 0x2000, 0x3000).expect("maps");
        assert_eq!(program.len(), 0x3000);
        assert!(!program.is_empty());
        assert_eq!(maps_of(&name), 2);
        drop(program);
        assert_eq!(maps_of(&name), 1, "unmapped with the value");
    }

    #[test]
    fn a_mapping_given_back_as_private_memory_keeps_its_bytes_and_shares_no_more() {
        let mut ram = SharedRam::new("test-private", 1 << 20).expect("memfd");
        ram.write(0x1_0000, b"registered user memory");
        let program = Mapping::new(ram.fd(), 0x1_0000, 0x1_0000).expect("maps");
        let (at, len) = (program.as_ptr(), program.len());
        let seen = |at: *mut u8, n: usize| {
            let mut buf = vec![0u8; n];
            // SAFETY: `at` is the start of `len` bytes mapped in this process (shared, then
            // private after `into_private`), and `n <= len`.
            unsafe { std::ptr::copy_nonoverlapping(at, buf.as_mut_ptr(), n) };
            buf
        };
        assert_eq!(seen(at, 22), b"registered user memory");
        program.into_private().expect("private now");
        assert_eq!(seen(at, 22), b"registered user memory", "kept");
        // SAFETY: as above; the range is this test's private memory now.
        unsafe { std::ptr::copy_nonoverlapping(b"the program's".as_ptr(), at, 13) };
        ram.write(0x1_0100, b"a device's");
        let mut back = [0u8; 22];
        ram.read(0x1_0000, &mut back);
        assert_eq!(
            &back, b"registered user memory",
            "the program's store stays its own"
        );
        assert_eq!(
            seen(at.wrapping_add(0x100), 10),
            [0u8; 10],
            "the RAM's store is not seen"
        );
        // SAFETY: the private range `into_private` left, unmapped once.
        let _ = unsafe { munmap(at.cast::<c_void>(), len) };
    }

    #[test]
    #[should_panic(expected = "outside shared memory")]
    fn a_copy_past_the_end_is_refused_not_performed() {
        let ram = SharedRam::new("small", 1 << 16).expect("memfd");
        let mut buf = [0u8; 2];
        HostMemory::read(&ram, (1 << 16) - 1, &mut buf);
    }
}
