//! The C calls of `sisci_api.h`. Every `unsafe` of the library is here: C hands in raw
//! pointers — out-parameters, handles, buffers — and this module checks what it can (null
//! pointers are `SCI_ERR_ILLEGAL_PARAMETER`, never a crash) and trusts the rest as C
//! callers must be trusted (a handle is a pointer this library returned and the program
//! has not freed).
//!
//! Handles are boxed objects of `client`; a call that frees a handle frees the box only
//! when it succeeded, so a failed remove leaves the program's handle valid.

#![allow(unsafe_code)]
// The C names are SISCI's.
#![allow(non_snake_case)]

mod dma;
mod events;

use crate::client::{
    Descriptor, Device, Failure, LocalInterrupt, LocalSegment, Map, RemoteInterrupt, RemoteSegment,
};
use crate::code;
use smartio_live::shm::Mapping;
use std::ffi::{c_char, c_uint, c_void};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// `sci_error_t`.
type SciError = c_uint;

/// `sci_callback_action_t`.
const SCI_CALLBACK_CANCEL: c_uint = 1;

const SCI_INFINITE_TIMEOUT: c_uint = 0xffff_ffff;
const SCI_FLAG_USE_CALLBACK: c_uint = 0x1;
const SCI_FLAG_FIXED_INTNO: c_uint = 0x2;
const SCI_FLAG_EMPTY: c_uint = 0x2;
const SCI_FLAG_PRIVATE: c_uint = 0x4;
const SCI_FLAG_AUTO_ID: c_uint = 0x2000_0000;
const SCI_FLAG_LOCK_USER_MEM: c_uint = 0x400;
const SCI_FLAG_READONLY_MAP: c_uint = 0x2;
const SCI_FLAG_IO_MAP_IOSPACE: c_uint = 0x80;
const SCI_FLAG_BROADCAST: c_uint = 0x40000;
/// `DIS_BROADCAST_NODEID_GROUP_ALL`: the node id of every member of a broadcast group.
const BROADCAST_NODE_ID: c_uint = 252;

/// The page size registered memory is counted in.
const PAGE: usize = 4096;

const SCI_Q_ADAPTER: c_uint = 1;
const SCI_Q_LOCAL_SEGMENT: c_uint = 2;
const SCI_Q_ADAPTER_NODEID: c_uint = 0x101;
const SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT: c_uint = 0x102;
const SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT: c_uint = 0x103;
const SCI_Q_ADAPTER_DMA_MTU: c_uint = 0x104;
const SCI_Q_LOCAL_SEGMENT_IOADDR: c_uint = 0x201;
const SCI_Q_LOCAL_SEGMENT_PHYS_ADDR: c_uint = 0x202;
const SCI_Q_DEVICE: c_uint = 4;
const SCI_Q_DEVICE_INFO: c_uint = 0x401;

const SCI_FLAG_EXCLUSIVE: c_uint = 0x0100_0000;
const SCI_FLAG_PCIE_REQUESTER_GLOBAL: c_uint = 0x1;

/// `SCIInitialize` calls not yet matched by `SCITerminate`.
static INITIALIZED: AtomicUsize = AtomicUsize::new(0);

/// A descriptor's handle.
pub struct Desc(Arc<Descriptor>);

/// A local segment's handle. Its memory is the host's from the start, or (made with
/// `SCI_FLAG_EMPTY`) the program's own buffer once it registers one.
pub struct Seg {
    desc: Arc<Descriptor>,
    /// The id asked for (`None`: automatic).
    id: Option<u32>,
    size: u64,
    backed: OnceLock<LocalSegment>,
    /// Registered user memory: the program's pages, replaced by the segment's.
    registered: Mutex<Option<Map>>,
    /// Made with `SCI_FLAG_BROADCAST`: a member of its id's reflective memory group once
    /// prepared.
    broadcast: bool,
    /// A callback waiting for the segment's memory (`SCI_FLAG_EMPTY`) to start.
    callback: Mutex<Option<events::SegmentCallback>>,
}

impl Seg {
    /// Gives it `size` bytes of the host's memory; refused (making nothing) if it has
    /// memory already — a second `SCIRegisterSegmentMemory` leaves no segment behind that
    /// would keep the descriptor from closing.
    fn back(&self, size: u64) -> Result<&LocalSegment, Failure> {
        let already = || Failure::new(code::ILLEGAL_OPERATION, "the segment already has memory");
        if self.backed.get().is_some() {
            return Err(already());
        }
        let seg = LocalSegment::create(&self.desc, self.id, size)?;
        if let Err(made) = self.backed.set(seg) {
            // Another thread gave it memory meanwhile: this one's goes again.
            let _ = made.remove();
            return Err(already());
        }
        self.memory()
    }

    /// Bytes of the segment: those of its memory once it has some (registered memory may
    /// be smaller than the size it was created with), what it was created with before.
    fn size(&self) -> u64 {
        self.backed.get().map_or(self.size, |s| s.size)
    }

    fn memory(&self) -> Result<&LocalSegment, Failure> {
        self.backed.get().ok_or_else(|| {
            Failure::new(
                code::ILLEGAL_OPERATION,
                "the segment was made with SCI_FLAG_EMPTY and has no memory yet (SCIRegisterSegmentMemory first)",
            )
        })
    }

    fn id(&self) -> c_uint {
        self.backed.get().map_or(self.id.unwrap_or(0), |s| s.id)
    }

    /// Removes it; registered memory goes back to the program first, as private memory
    /// holding what the segment held — and is registered again if the removal is refused
    /// (still connected: `SCI_ERR_BUSY`), so a refused remove changes nothing.
    fn remove(&self) -> Result<(), Failure> {
        let Some(seg) = self.backed.get() else {
            return Ok(());
        };
        let mut registered = self
            .registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(map) = registered.take() else {
            return seg.remove();
        };
        let (at, len) = (map.as_ptr(), map.len);
        map.unmap_into_private()?;
        seg.remove().inspect_err(|_| {
            // The segment stays: its memory, which holds every byte written to it since
            // (by other hosts too), takes the buffer's place again.
            // SAFETY: the buffer was registered until just now and is the program's again.
            if let Ok(again) = unsafe { register(seg, at, len as usize, Bytes::Segments) } {
                *registered = Some(again);
            }
        })
    }
}

/// Whose bytes registered memory holds once mapped.
enum Bytes {
    /// The program's buffer's (registering).
    Buffers,
    /// The segment's (registering again after a refused removal).
    Segments,
}

/// Makes the segment's memory take the place of the program's buffer `at..at + len`.
///
/// # Safety
/// `at..at + len` is page-aligned memory of the program that it gives to the segment.
unsafe fn register(
    local: &LocalSegment,
    at: *mut u8,
    len: usize,
    bytes: Bytes,
) -> Result<Map, Failure> {
    let (handle, fd, offset) = local.map_file()?;
    let kept = match bytes {
        Bytes::Buffers => {
            let mut copy = vec![0u8; len];
            // SAFETY: the program's buffer holds `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(at, copy.as_mut_ptr(), len) };
            Some(copy)
        }
        Bytes::Segments => None,
    };
    // SAFETY: the caller gives these pages to the segment; what they must hold was copied.
    let mapping = unsafe { Mapping::over(fd.as_fd(), offset, len as u64, at) }
        .map_err(|e| Failure::new(code::SYSTEM, e.to_string()))?;
    if let Some(copy) = kept {
        mapping.write(0, &copy);
    }
    Ok(Map::adopt(local, handle, mapping))
}

/// The memory of a live segment handle.
///
/// # Safety
/// As for [`object`].
unsafe fn backed<'a>(segment: *mut Seg) -> Result<&'a LocalSegment, Failure> {
    // SAFETY: the caller's contract.
    unsafe { object(segment, "the segment") }?.memory()
}

/// # Safety
/// `addr..addr + size` is memory of the program (page aligned, whole pages) that it gives
/// the segment until the segment is removed; `segment` is a live handle made with
/// `SCI_FLAG_EMPTY`.
#[no_mangle]
pub unsafe extern "C" fn SCIRegisterSegmentMemory(
    addr: *mut c_void,
    size: usize,
    segment: *mut Seg,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, SCI_FLAG_LOCK_USER_MEM)?;
        // SAFETY: the caller's contract.
        let seg = unsafe { object(segment, "the segment") }?;
        if addr.is_null() || !(addr as usize).is_multiple_of(PAGE) {
            return Err(Failure::new(
                code::ILLEGAL_ADDRESS,
                format!("{addr:p}: registered memory starts on a 4 KiB page"),
            ));
        }
        if size == 0 || !size.is_multiple_of(PAGE) || size as u64 > seg.size {
            return Err(Failure::new(
                code::SIZE_ALIGNMENT,
                format!(
                    "{size} bytes: registered memory is whole 4 KiB pages, at most the segment's {} bytes",
                    seg.size
                ),
            ));
        }
        let local = seg.back(size as u64)?;
        // The program's bytes move into the segment's memory, which then takes the
        // buffer's place in the address space.
        // SAFETY: the caller gives the buffer to the segment.
        let map = unsafe { register(local, addr.cast(), size, Bytes::Buffers) }?;
        *seg.registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(map);
        let waiting = seg
            .callback
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(target) = waiting {
            target.serve(Arc::clone(&seg.desc), local.handle())?;
        }
        Ok(())
    })();
    report(error, result)
}

/// # Safety
/// Takes no pointer it dereferences but `segment`, a live handle.
#[no_mangle]
pub unsafe extern "C" fn SCIAttachPhysicalMemory(
    _ioaddr: u64,
    _addr: *mut c_void,
    _bus: c_uint,
    _size: usize,
    segment: *mut Seg,
    _flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract.
    let result = unsafe { object(segment, "the segment") }.and_then(|_| {
        Err(Failure::new(
            code::NOT_IMPLEMENTED,
            "SCIAttachPhysicalMemory: the live engine does not give programs physical memory to attach (register user memory instead)",
        ))
    });
    report(error, result)
}

/// # Safety
/// Dereferences nothing but `segment`, a live handle.
#[no_mangle]
pub unsafe extern "C" fn SCIShareSegment(segment: *mut Seg, _flags: c_uint, error: *mut SciError) {
    // SAFETY: the caller's contract.
    let result = unsafe { object(segment, "the segment") }.and_then(|_| {
        Err(Failure::new(
            code::NOT_IMPLEMENTED,
            "SCIShareSegment: programs of one host do not share local segments on the live engine; connect to the segment instead",
        ))
    });
    report(error, result)
}

/// # Safety
/// Dereferences no pointer.
#[no_mangle]
pub unsafe extern "C" fn SCIAttachLocalSegment(
    _sd: *mut Desc,
    _segment: *mut *mut Seg,
    _segment_id: c_uint,
    _size: *mut usize,
    _callback: *const c_void,
    _callback_arg: *mut c_void,
    _flags: c_uint,
    error: *mut SciError,
) {
    report(
        error,
        Err(Failure::new(
            code::NOT_IMPLEMENTED,
            "SCIAttachLocalSegment: programs of one host do not share local segments on the live engine; connect to the segment instead",
        )),
    )
}

/// A sequence's handle: sequences see no transfer errors on the live engine (stores into
/// shared memory cannot be lost). A sequence of a broadcast map carries its store barrier.
pub struct Sequence {
    barrier: Option<crate::client::StoreBarrier>,
}

impl Sequence {
    /// Orders the program's stores before what follows; on a broadcast map, waits until the
    /// daemon delivered them to every member.
    fn barrier(&self) -> Result<(), Failure> {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.barrier.as_ref().map_or(Ok(()), |b| b.wait())
    }
}

/// Writes `result` to `error` (if the program gave somewhere to write it); with
/// `SMARTIO_SISCI_VERBOSE` set, a failure's message goes to standard error.
fn report(error: *mut SciError, result: Result<(), Failure>) {
    let value = match result {
        Ok(()) => code::OK,
        Err(f) => {
            if std::env::var_os("SMARTIO_SISCI_VERBOSE").is_some() {
                eprintln!("libsisci: {:#x}: {}", f.code, f.message);
            }
            f.code
        }
    };
    if !error.is_null() {
        // SAFETY: a non-null `error` is the program's `sci_error_t` to write.
        unsafe { error.write(value) }
    }
}

fn illegal(what: &str) -> Failure {
    Failure::new(code::ILLEGAL_PARAMETER, format!("{what} is NULL"))
}

fn initialized() -> Result<(), Failure> {
    if INITIALIZED.load(Ordering::SeqCst) == 0 {
        return Err(Failure::new(
            code::NOT_INITIALIZED,
            "SCIInitialize has not been called",
        ));
    }
    Ok(())
}

/// The object behind a handle.
///
/// # Safety
/// `handle` is null or a pointer this library returned for a `T` that is still live.
unsafe fn object<'a, T>(handle: *mut T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: the caller's contract.
    unsafe { handle.as_ref() }.ok_or_else(|| illegal(what))
}

/// Stores a new handle in the program's out-parameter.
///
/// # Safety
/// `out` is null or points to where the program wants the handle.
unsafe fn hand_out<T>(out: *mut *mut T, value: T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(illegal("the handle's out-parameter"));
    }
    // SAFETY: checked non-null; the caller's contract.
    unsafe { out.write(Box::into_raw(Box::new(value))) };
    Ok(())
}

/// Hands out `handle` (made with `Box::into_raw`) once its callbacks `started`; if they did
/// not, `undo` ends the object and the handle is freed.
///
/// # Safety
/// `out` is non-null and the program's; `handle` was made with `Box::into_raw` and not
/// handed out.
unsafe fn hand_out_started<T>(
    out: *mut *mut T,
    handle: *mut T,
    started: Result<(), Failure>,
    undo: impl FnOnce(&T),
) -> Result<(), Failure> {
    match started {
        Ok(()) => {
            // SAFETY: the caller's contract.
            unsafe { out.write(handle) };
            Ok(())
        }
        Err(f) => {
            // SAFETY: the caller's contract: made with Box::into_raw, freed once, here.
            let made = unsafe { Box::from_raw(handle) };
            undo(&made);
            Err(f)
        }
    }
}

/// Frees a handle after `remove` succeeded on it.
///
/// # Safety
/// As for [`object`]; the program does not use the handle again once this succeeded.
unsafe fn free_after<T>(
    handle: *mut T,
    what: &str,
    remove: impl FnOnce(&T) -> Result<(), Failure>,
) -> Result<(), Failure> {
    // SAFETY: the caller's contract.
    remove(unsafe { object(handle, what) }?)?;
    // SAFETY: made by `hand_out` with `Box::into_raw`; freed once, here.
    drop(unsafe { Box::from_raw(handle) });
    Ok(())
}

/// `Ok` if the program gave somewhere to put a handle (checked before anything is made,
/// so a NULL out-parameter leaves nothing behind).
fn need<T>(out: *mut *mut T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(illegal(what));
    }
    Ok(())
}

fn flags_only(flags: c_uint, allowed: c_uint) -> Result<(), Failure> {
    if flags & !allowed != 0 {
        return Err(Failure::new(
            code::ILLEGAL_FLAG,
            format!("flags {:#x} are not taken by this call", flags & !allowed),
        ));
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn SCIInitialize(flags: c_uint, error: *mut SciError) {
    let result = flags_only(flags, 0).map(|()| {
        INITIALIZED.fetch_add(1, Ordering::SeqCst);
    });
    report(error, result)
}

#[no_mangle]
pub extern "C" fn SCITerminate() {
    let _ = INITIALIZED.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
}

/// # Safety
/// `sd` is where the program wants the descriptor.
#[no_mangle]
pub unsafe extern "C" fn SCIOpen(sd: *mut *mut Desc, flags: c_uint, error: *mut SciError) {
    let result = (|| {
        initialized()?;
        flags_only(flags, 0)?;
        need(sd, "sd")?;
        let desc = Descriptor::open()?;
        // SAFETY: the caller's contract.
        unsafe { hand_out(sd, Desc(Arc::new(desc))) }
    })();
    report(error, result)
}

/// # Safety
/// `sd` is a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn SCIClose(sd: *mut Desc, flags: c_uint, error: *mut SciError) {
    let result = flags_only(flags, 0).and_then(|()| {
        // SAFETY: the caller's contract.
        unsafe {
            free_after(sd, "the descriptor", |d| match d.0.live_objects() {
                0 => Ok(()),
                n => Err(Failure::new(
                    code::BUSY,
                    format!("{n} segments, maps or interrupts of the descriptor are still live"),
                )),
            })
        }
    });
    report(error, result)
}

#[no_mangle]
pub extern "C" fn SCIGetErrorString(error: SciError) -> *const c_char {
    code::describe(error).as_ptr().cast()
}

/// Opens a descriptor for one query (the calls without one).
fn query_descriptor() -> Result<Descriptor, Failure> {
    initialized()?;
    Descriptor::open()
}

/// # Safety
/// `node_id` is where the program wants the node id.
#[no_mangle]
pub unsafe extern "C" fn SCIGetLocalNodeId(
    adapter: c_uint,
    node_id: *mut c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        if node_id.is_null() {
            return Err(illegal("nodeId"));
        }
        let id = query_descriptor()?.local_node_id(adapter)?;
        // SAFETY: checked non-null; the caller's contract.
        unsafe { node_id.write(id) };
        Ok(())
    })();
    report(error, result)
}

/// # Safety
/// `sd` is a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn SCIProbeNode(
    sd: *mut Desc,
    adapter: c_uint,
    node_id: c_uint,
    flags: c_uint,
    error: *mut SciError,
) -> std::ffi::c_int {
    let result = flags_only(flags, 0).and_then(|()| {
        // SAFETY: the caller's contract.
        unsafe { object(sd, "the descriptor") }?
            .0
            .probe_node(adapter, node_id)
    });
    let reachable = result.is_ok();
    report(error, result);
    std::ffi::c_int::from(reachable)
}

/// Entries of `dis_nodeId_list_t`: an adapter name stands for at most `DIS_MAX_NSCIS`
/// adapters, and the list ends with a 0.
const NODE_ID_LIST: usize = 5;

/// # Safety
/// `name` is a NUL-terminated string; `list` and `kind` are null or the program's.
#[no_mangle]
pub unsafe extern "C" fn SCIGetNodeIdByAdapterName(
    name: *const c_char,
    list: *mut [c_uint; NODE_ID_LIST],
    kind: *mut c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        if name.is_null() || list.is_null() {
            return Err(illegal("adaptername or nodeId"));
        }
        // SAFETY: the caller's contract: a NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(name) };
        let name = name
            .to_str()
            .map_err(|_| Failure::new(code::ILLEGAL_PARAMETER, "the adapter name is not UTF-8"))?;
        let ids = query_descriptor()?.node_ids_named(name)?;
        let mut out = [0 as c_uint; NODE_ID_LIST];
        for (to, id) in out.iter_mut().zip(ids.iter().take(NODE_ID_LIST - 1)) {
            *to = *id;
        }
        // SAFETY: checked non-null; the program's list.
        unsafe { list.write(out) };
        // SAFETY: null or the program's.
        if let Some(k) = unsafe { kind.as_mut() } {
            // DIS_VIRTUAL_ADAPTER_NONE: every adapter here is a physical one.
            *k = 0;
        }
        Ok(())
    })();
    report(error, result)
}

/// `sci_query_adapter_t`.
#[repr(C)]
pub struct QueryAdapter {
    local_adapter_no: c_uint,
    port_no: c_uint,
    subcommand: c_uint,
    data: *mut c_void,
}

/// `sci_query_local_segment_t`.
#[repr(C)]
pub struct QueryLocalSegment {
    segment: *mut Seg,
    subcommand: c_uint,
    ioaddr: u64,
}

/// # Safety
/// `data` points to the record `command` names.
#[no_mangle]
pub unsafe extern "C" fn SCIQuery(
    command: c_uint,
    data: *mut c_void,
    _flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        if data.is_null() {
            return Err(illegal("the query's data"));
        }
        match command {
            SCI_Q_ADAPTER => {
                // SAFETY: SCI_Q_ADAPTER's record, as the caller promises.
                let q = unsafe { &mut *data.cast::<QueryAdapter>() };
                if q.data.is_null() {
                    return Err(illegal("the adapter query's data"));
                }
                // The adapter must exist whatever is asked of it.
                let id = query_descriptor()?.local_node_id(q.local_adapter_no)?;
                let answer = match q.subcommand {
                    SCI_Q_ADAPTER_NODEID => id,
                    // The adapter's DMA engine moves any byte count from any byte offset.
                    SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT | SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT => 1,
                    // One vector entry moves at most this much.
                    SCI_Q_ADAPTER_DMA_MTU => {
                        smartio_devices::ntb_dma::spec::MAX_TRANSFER_BYTES as c_uint
                    }
                    other => {
                        return Err(Failure::new(
                            code::ILLEGAL_QUERY,
                            format!("adapter subcommand {other:#x}"),
                        ))
                    }
                };
                // SAFETY: each of these subcommands' answer is an unsigned int.
                unsafe { q.data.cast::<c_uint>().write(answer) };
                Ok(())
            }
            SCI_Q_LOCAL_SEGMENT => {
                // SAFETY: SCI_Q_LOCAL_SEGMENT's record, as the caller promises.
                let q = unsafe { &mut *data.cast::<QueryLocalSegment>() };
                // SAFETY: the caller's contract.
                let seg = unsafe { backed(q.segment) }?;
                match q.subcommand {
                    SCI_Q_LOCAL_SEGMENT_IOADDR | SCI_Q_LOCAL_SEGMENT_PHYS_ADDR => {
                        q.ioaddr = seg.phys;
                        Ok(())
                    }
                    other => Err(Failure::new(
                        code::ILLEGAL_QUERY,
                        format!("local segment subcommand {other:#x}"),
                    )),
                }
            }
            SCI_Q_DEVICE => {
                // SAFETY: SCI_Q_DEVICE's record, as the caller promises.
                let q = unsafe { &mut *data.cast::<QueryDevice>() };
                if q.data.is_null() {
                    return Err(illegal("the device query's data"));
                }
                if q.subcommand != SCI_Q_DEVICE_INFO {
                    return Err(Failure::new(
                        code::ILLEGAL_QUERY,
                        format!("device subcommand {:#x}", q.subcommand),
                    ));
                }
                let entry = query_descriptor()?
                    .devices()?
                    .into_iter()
                    .find(|d| d.fdid == q.fdid)
                    .ok_or_else(|| Failure::new(code::NO_SUCH_FDID, format!("fdid {}", q.fdid)))?;
                // SAFETY: SCI_Q_DEVICE_INFO's answer is a sci_smartio_device_info_t.
                unsafe { q.data.cast::<DeviceInfo>().write(DeviceInfo::of(&entry)) };
                Ok(())
            }
            other => Err(Failure::new(
                code::ILLEGAL_QUERY,
                format!("query {other:#x}"),
            )),
        }
    })();
    report(error, result)
}

/// # Safety
/// `sd` is a live descriptor; `segment` is where the program wants the handle; `callback`,
/// if given, is a `sci_cb_local_segment_t` whose argument may be used on another thread.
#[no_mangle]
pub unsafe extern "C" fn SCICreateSegment(
    sd: *mut Desc,
    segment: *mut *mut Seg,
    segment_id: c_uint,
    size: usize,
    callback: Option<events::LocalSegmentCallback>,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(
            flags,
            SCI_FLAG_AUTO_ID
                | SCI_FLAG_PRIVATE
                | SCI_FLAG_EMPTY
                | SCI_FLAG_USE_CALLBACK
                | SCI_FLAG_BROADCAST,
        )?;
        let broadcast = flags & SCI_FLAG_BROADCAST != 0;
        if broadcast && flags & (SCI_FLAG_AUTO_ID | SCI_FLAG_PRIVATE) != 0 {
            return Err(Failure::new(
                code::ILLEGAL_FLAG,
                "a broadcast segment's id names its group: SCI_FLAG_BROADCAST takes no SCI_FLAG_AUTO_ID or SCI_FLAG_PRIVATE",
            ));
        }
        let callback = events::chosen(flags, callback)?;
        need(segment, "segment")?;
        // SAFETY: the caller's contract.
        let desc = unsafe { object(sd, "the descriptor") }?;
        let id = (flags & (SCI_FLAG_AUTO_ID | SCI_FLAG_PRIVATE) == 0).then_some(segment_id);
        let seg = Seg {
            desc: Arc::clone(&desc.0),
            id,
            size: size as u64,
            backed: OnceLock::new(),
            registered: Mutex::new(None),
            broadcast,
            callback: Mutex::new(None),
        };
        // Without SCI_FLAG_EMPTY the memory is the host's at once; with it, it comes from
        // SCIRegisterSegmentMemory.
        if flags & SCI_FLAG_EMPTY == 0 {
            seg.back(size as u64)?;
        }
        let handle = Box::into_raw(Box::new(seg));
        // SAFETY: made just above, not handed out yet.
        let made = unsafe { &*handle };
        let started = match callback {
            Some(cb) => {
                let target = events::SegmentCallback::Local(cb, callback_arg, handle);
                match made.backed.get() {
                    Some(local) => target.serve(Arc::clone(&made.desc), local.handle()),
                    // Events begin with memory: SCIRegisterSegmentMemory starts the callbacks.
                    None => {
                        *made
                            .callback
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(target);
                        Ok(())
                    }
                }
            }
            None => Ok(()),
        };
        // SAFETY: made above and not handed out; `segment` checked by `need`.
        unsafe { hand_out_started(segment, handle, started, |s| drop(s.remove())) }
    })();
    report(error, result)
}

/// The flags `SCIPrepareSegment` and `SCISetSegmentAvailable` take: `SCI_FLAG_BROADCAST` for
/// a broadcast segment.
fn segment_flags(seg: &Seg, flags: c_uint) -> Result<(), Failure> {
    flags_only(flags, if seg.broadcast { SCI_FLAG_BROADCAST } else { 0 })
}

/// # Safety
/// `segment` is a live segment handle.
#[no_mangle]
pub unsafe extern "C" fn SCIPrepareSegment(
    segment: *mut Seg,
    adapter: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        // SAFETY: the caller's contract.
        let seg = unsafe { object(segment, "the segment") }?;
        segment_flags(seg, flags)?;
        let local = seg.memory()?;
        local.prepare(adapter)?;
        // A broadcast segment receives its group through the adapter it is prepared on.
        if seg.broadcast {
            local.join_reflective(adapter)?;
        }
        Ok(())
    })();
    report(error, result)
}

macro_rules! availability_call {
    ($name:ident, $available:expr) => {
        /// # Safety
        /// `segment` is a live segment handle.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            segment: *mut Seg,
            adapter: c_uint,
            flags: c_uint,
            error: *mut SciError,
        ) {
            let result = (|| {
                // SAFETY: the caller's contract.
                let seg = unsafe { object(segment, "the segment") }?;
                segment_flags(seg, flags)?;
                seg.memory()?.set_available(adapter, $available)
            })();
            report(error, result)
        }
    };
}

availability_call!(SCISetSegmentAvailable, true);
availability_call!(SCISetSegmentUnavailable, false);

/// # Safety
/// `segment` is a live segment handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIRemoveSegment(segment: *mut Seg, flags: c_uint, error: *mut SciError) {
    let result = flags_only(flags, 0)
        // SAFETY: the caller's contract.
        .and_then(|()| unsafe { free_after(segment, "the segment", Seg::remove) });
    report(error, result)
}

/// # Safety
/// `segment` is a live segment handle (or null: 0).
#[no_mangle]
pub unsafe extern "C" fn SCIGetLocalSegmentId(segment: *mut Seg) -> c_uint {
    // SAFETY: the caller's contract.
    unsafe { object(segment, "the segment") }.map_or(0, Seg::id)
}

/// # Safety
/// `segment` is a live segment handle (or null: 0).
#[no_mangle]
pub unsafe extern "C" fn SCIGetLocalSegmentSize(segment: *mut Seg) -> usize {
    // SAFETY: the caller's contract.
    unsafe { object(segment, "the segment") }.map_or(0, |s| s.size() as usize)
}

/// Runs `attempt` until it succeeds, fails with something other than "not there (yet)",
/// or `timeout_ms` passes (`SCI_INFINITE_TIMEOUT`: never).
fn retry<T>(
    timeout_ms: c_uint,
    mut attempt: impl FnMut() -> Result<T, Failure>,
) -> Result<T, Failure> {
    let deadline = (timeout_ms != SCI_INFINITE_TIMEOUT)
        .then(|| Instant::now() + Duration::from_millis(u64::from(timeout_ms)));
    loop {
        match attempt() {
            Err(f)
                if (f.code == code::NO_SUCH_SEGMENT || f.code == code::CONNECTION_REFUSED)
                    && deadline.is_none_or(|d| Instant::now() < d) =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            other => return other,
        }
    }
}

/// # Safety
/// `sd` is a live descriptor; `segment` is where the program wants the handle.
#[no_mangle]
pub unsafe extern "C" fn SCIConnectSegment(
    sd: *mut Desc,
    segment: *mut *mut RemoteSegment,
    node_id: c_uint,
    segment_id: c_uint,
    adapter: c_uint,
    callback: Option<events::RemoteSegmentCallback>,
    callback_arg: *mut c_void,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, SCI_FLAG_USE_CALLBACK | SCI_FLAG_BROADCAST)?;
        need(segment, "segment")?;
        // SAFETY: the caller's contract.
        let desc = unsafe { object(sd, "the descriptor") }?;
        let broadcast = flags & SCI_FLAG_BROADCAST != 0;
        if broadcast != (node_id == BROADCAST_NODE_ID) {
            return Err(Failure::new(
                code::ILLEGAL_PARAMETER,
                format!("node id {node_id} with flags {flags:#x}: a broadcast connection names DIS_BROADCAST_NODEID_GROUP_ALL ({BROADCAST_NODE_ID}) and SCI_FLAG_BROADCAST, together"),
            ));
        }
        let callback = events::chosen(flags, callback)?;
        let remote = retry(timeout, || {
            if broadcast {
                RemoteSegment::connect_reflective(&desc.0, node_id, segment_id, adapter)
            } else {
                RemoteSegment::connect(&desc.0, node_id, segment_id, adapter)
            }
        })?;
        let daemon_handle = remote.handle;
        let handle = Box::into_raw(Box::new(remote));
        let started = match callback {
            Some(cb) => events::SegmentCallback::Remote(cb, callback_arg, handle)
                .serve(Arc::clone(&desc.0), daemon_handle),
            None => Ok(()),
        };
        // SAFETY: made above and not handed out; `segment` checked by `need`.
        unsafe { hand_out_started(segment, handle, started, |r| drop(r.disconnect())) }
    })();
    report(error, result)
}

/// # Safety
/// `segment` is a live connection handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIDisconnectSegment(
    segment: *mut RemoteSegment,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = flags_only(flags, 0).and_then(|()| {
        // SAFETY: the caller's contract.
        unsafe { free_after(segment, "the remote segment", RemoteSegment::disconnect) }
    });
    report(error, result)
}

/// # Safety
/// `segment` is a live connection handle (or null: 0).
#[no_mangle]
pub unsafe extern "C" fn SCIGetRemoteSegmentSize(segment: *mut RemoteSegment) -> usize {
    // SAFETY: the caller's contract.
    unsafe { object(segment, "the segment") }.map_or(0, |s| s.size as usize)
}

/// # Safety
/// `segment` is a live connection handle (or null: 0).
#[no_mangle]
pub unsafe extern "C" fn SCIGetRemoteSegmentNodeId(segment: *mut RemoteSegment) -> c_uint {
    // SAFETY: the caller's contract.
    unsafe { object(segment, "the segment") }.map_or(0, |s| s.node_id)
}

/// # Safety
/// `segment` is a live connection handle (or null: 0).
#[no_mangle]
pub unsafe extern "C" fn SCIGetRemoteSegmentId(segment: *mut RemoteSegment) -> c_uint {
    // SAFETY: the caller's contract.
    unsafe { object(segment, "the segment") }.map_or(0, |s| s.segment_id)
}

/// A map's address for C, or null after a failure.
fn map_pointer(
    map_out: *mut *mut Map,
    made: Result<Map, Failure>,
    error: *mut SciError,
) -> *mut c_void {
    let result = made.and_then(|map| {
        let ptr = map.as_ptr();
        // SAFETY: the caller's contract (passed on from the C call).
        unsafe { hand_out(map_out, map) }.map(|()| ptr)
    });
    match result {
        Ok(ptr) => {
            report(error, Ok(()));
            ptr.cast()
        }
        Err(f) => {
            report(error, Err(f));
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// `segment` is a live segment handle; `map` is where the program wants the map handle.
#[no_mangle]
pub unsafe extern "C" fn SCIMapLocalSegment(
    segment: *mut Seg,
    map: *mut *mut Map,
    offset: usize,
    size: usize,
    _addr: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) -> *mut c_void {
    let made = (|| {
        flags_only(flags, SCI_FLAG_READONLY_MAP | SCI_FLAG_IO_MAP_IOSPACE)?;
        need(map, "map")?;
        // SAFETY: the caller's contract.
        let seg = unsafe { backed(segment) }?;
        seg.map(offset as u64, size as u64)
    })();
    map_pointer(map, made, error)
}

/// # Safety
/// `segment` is a live connection handle; `map` is where the program wants the map handle.
#[no_mangle]
pub unsafe extern "C" fn SCIMapRemoteSegment(
    segment: *mut RemoteSegment,
    map: *mut *mut Map,
    offset: usize,
    size: usize,
    _addr: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) -> *mut c_void {
    let made = (|| {
        flags_only(
            flags,
            SCI_FLAG_READONLY_MAP | SCI_FLAG_IO_MAP_IOSPACE | SCI_FLAG_BROADCAST,
        )?;
        need(map, "map")?;
        // SAFETY: the caller's contract.
        let seg = unsafe { object(segment, "the remote segment") }?;
        seg.map(offset as u64, size as u64)
    })();
    map_pointer(map, made, error)
}

/// # Safety
/// `map` is a live map handle; it (and the memory) is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIUnmapSegment(map: *mut Map, flags: c_uint, error: *mut SciError) {
    let result = flags_only(flags, 0)
        // SAFETY: the caller's contract.
        .and_then(|()| unsafe { free_after(map, "the map", Map::unmap) });
    report(error, result)
}

/// # Safety
/// `map` is a live map handle; `sequence` is where the program wants the handle.
#[no_mangle]
pub unsafe extern "C" fn SCICreateMapSequence(
    map: *mut Map,
    sequence: *mut *mut Sequence,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        need(sequence, "sequence")?;
        // SAFETY: the caller's contract.
        let barrier = unsafe { object(map, "the map") }?.barrier();
        // SAFETY: the caller's contract.
        unsafe { hand_out(sequence, Sequence { barrier }) }
    })();
    report(error, result)
}

/// # Safety
/// `sequence` is a live sequence handle.
#[no_mangle]
pub unsafe extern "C" fn SCIStartSequence(
    sequence: *mut Sequence,
    _flags: c_uint,
    error: *mut SciError,
) -> c_uint {
    // SAFETY: the caller's contract.
    let result = unsafe { object(sequence, "the sequence") }.map(|_| ());
    let ok = result.is_ok();
    report(error, result);
    if ok {
        0
    } else {
        2
    }
}

/// # Safety
/// `sequence` is a live sequence handle.
#[no_mangle]
pub unsafe extern "C" fn SCICheckSequence(
    sequence: *mut Sequence,
    flags: c_uint,
    error: *mut SciError,
) -> c_uint {
    std::sync::atomic::fence(Ordering::SeqCst);
    // SAFETY: the caller's contract.
    unsafe { SCIStartSequence(sequence, flags, error) }
}

/// # Safety
/// `sequence` is a live sequence handle; it is freed.
#[no_mangle]
pub unsafe extern "C" fn SCIRemoveSequence(
    sequence: *mut Sequence,
    _flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract.
    let result = unsafe { free_after(sequence, "the sequence", |_| Ok(())) };
    report(error, result)
}

/// # Safety
/// `sequence` is null or a live sequence handle.
#[no_mangle]
pub unsafe extern "C" fn SCIFlush(sequence: *mut Sequence, _flags: c_uint) {
    // Stores into shared memory need no adapter flush; order them before what follows (and
    // deliver a broadcast map's).
    // SAFETY: null or a live handle, the caller's contract.
    match unsafe { sequence.as_ref() } {
        Some(s) => {
            let _ = s.barrier();
        }
        None => std::sync::atomic::fence(Ordering::SeqCst),
    }
}

/// # Safety
/// `sequence` is null or a live sequence handle.
#[no_mangle]
pub unsafe extern "C" fn SCIStoreBarrier(sequence: *mut Sequence, flags: c_uint) {
    // SAFETY: the caller's contract.
    unsafe { SCIFlush(sequence, flags) }
}

/// # Safety
/// `source` holds `size` bytes; `dest` is `size` bytes of a map of the program.
#[no_mangle]
pub unsafe extern "C" fn SCIMemWrite(
    source: *mut c_void,
    dest: *mut c_void,
    size: usize,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        if size == 0 {
            return Ok(());
        }
        if source.is_null() || dest.is_null() {
            return Err(illegal("memAddr or remoteAddr"));
        }
        // SAFETY: the caller's contract: both hold `size` bytes (a remote map is memory of
        // the process here).
        unsafe { std::ptr::copy(source.cast::<u8>(), dest.cast::<u8>(), size) };
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    })();
    report(error, result)
}

/// `sci_cb_data_interrupt_t`.
type DataCallback = extern "C" fn(
    arg: *mut c_void,
    interrupt: *mut Intr,
    data: *mut c_void,
    length: c_uint,
    error: SciError,
) -> c_uint;

/// `sci_cb_interrupt_t`.
type PlainCallback =
    extern "C" fn(arg: *mut c_void, interrupt: *mut Intr, error: SciError) -> c_uint;

/// A program's interrupt callback, with or without the message.
#[derive(Clone, Copy)]
enum Callback {
    Data(DataCallback),
    Plain(PlainCallback),
}

/// A local interrupt's handle: shared with its callback thread and with calls waiting on
/// it, so removing it while they run frees nothing they use.
pub type Intr = Arc<LocalInterrupt>;

/// What a callback thread needs of the C side: pointers the program keeps valid while the
/// interrupt exists.
struct CallbackTarget {
    callback: Callback,
    arg: *mut c_void,
    /// The program's handle, passed back to it (never dereferenced here).
    handle: *mut Intr,
}

// SAFETY: SISCI calls callbacks on a thread of the library; the program that registers one
// promises its argument may be used there. `handle` is only passed back to the program.
unsafe impl Send for CallbackTarget {}

impl CallbackTarget {
    /// Waits for messages and hands each to the callback until it cancels or the interrupt
    /// is removed (its waits are then refused).
    fn serve(self, intr: Intr) {
        while !intr.stop.load(Ordering::SeqCst) {
            match intr.wait(Some(50)) {
                Ok(mut data) => {
                    let action = match self.callback {
                        Callback::Data(cb) => cb(
                            self.arg,
                            self.handle,
                            data.as_mut_ptr().cast(),
                            data.len() as c_uint,
                            code::OK,
                        ),
                        Callback::Plain(cb) => cb(self.arg, self.handle, code::OK),
                    };
                    if action == SCI_CALLBACK_CANCEL {
                        break;
                    }
                }
                Err(f) if f.code == code::TIMEOUT => {}
                Err(_) => break,
            }
        }
    }
}

/// Creates a (data) interrupt, with a callback thread if asked.
///
/// # Safety
/// As for the C calls that use it.
unsafe fn create_interrupt(
    sd: *mut Desc,
    interrupt: *mut *mut Intr,
    adapter: c_uint,
    number: *mut c_uint,
    callback: Option<Callback>,
    callback_arg: *mut c_void,
    flags: c_uint,
) -> Result<(), Failure> {
    flags_only(flags, SCI_FLAG_USE_CALLBACK | SCI_FLAG_FIXED_INTNO)?;
    // SAFETY: the caller's contract.
    let desc = unsafe { object(sd, "the descriptor") }?;
    if number.is_null() || interrupt.is_null() {
        return Err(illegal("interruptNo or the handle's out-parameter"));
    }
    let wanted = if flags & SCI_FLAG_FIXED_INTNO != 0 {
        // SAFETY: checked non-null.
        Some(unsafe { number.read() })
    } else {
        None
    };
    let callback = match (flags & SCI_FLAG_USE_CALLBACK != 0, callback) {
        (true, Some(cb)) => Some(cb),
        (true, None) => return Err(illegal("the callback")),
        (false, _) => None,
    };
    let intr = Arc::new(LocalInterrupt::create(&desc.0, adapter, wanted)?);
    // SAFETY: checked non-null.
    unsafe { number.write(intr.number) };
    let handle = Box::into_raw(Box::new(Arc::clone(&intr)));
    if let Some(callback) = callback {
        let target = CallbackTarget {
            callback,
            arg: callback_arg,
            handle,
        };
        let spawned = std::thread::Builder::new()
            .name("sisci-callback".into())
            .spawn(move || target.serve(intr));
        if let Err(e) = spawned {
            // SAFETY: made above and not handed out.
            let made = unsafe { Box::from_raw(handle) };
            let _ = made.remove();
            return Err(Failure::new(
                code::SYSTEM,
                format!("no thread for the callback: {e}"),
            ));
        }
    }
    // SAFETY: checked non-null.
    unsafe { interrupt.write(handle) };
    Ok(())
}

/// Removes an interrupt; its callback thread (if any) ends when it next looks.
///
/// # Safety
/// `interrupt` is a live interrupt handle; it is freed when this succeeds.
unsafe fn remove_interrupt(interrupt: *mut Intr, flags: c_uint) -> Result<(), Failure> {
    flags_only(flags, 0)?;
    // SAFETY: the caller's contract.
    unsafe {
        free_after(interrupt, "the interrupt", |i| {
            i.remove()?;
            i.stop.store(true, Ordering::SeqCst);
            Ok(())
        })
    }
}

/// # Safety
/// `sd` is a live descriptor; `interrupt` is where the program wants the handle;
/// `number` is the interrupt number (in with SCI_FLAG_FIXED_INTNO, out always);
/// `callback`, if given, is a `sci_cb_data_interrupt_t`.
#[no_mangle]
pub unsafe extern "C" fn SCICreateDataInterrupt(
    sd: *mut Desc,
    interrupt: *mut *mut Intr,
    adapter: c_uint,
    number: *mut c_uint,
    callback: Option<DataCallback>,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) {
    let callback = callback.map(Callback::Data);
    // SAFETY: the caller's contract.
    let result = unsafe {
        create_interrupt(
            sd,
            interrupt,
            adapter,
            number,
            callback,
            callback_arg,
            flags,
        )
    };
    report(error, result)
}

/// # Safety
/// As for [`SCICreateDataInterrupt`]; `callback`, if given, is a `sci_cb_interrupt_t`.
#[no_mangle]
pub unsafe extern "C" fn SCICreateInterrupt(
    sd: *mut Desc,
    interrupt: *mut *mut Intr,
    adapter: c_uint,
    number: *mut c_uint,
    callback: Option<PlainCallback>,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) {
    let callback = callback.map(Callback::Plain);
    // SAFETY: the caller's contract.
    let result = unsafe {
        create_interrupt(
            sd,
            interrupt,
            adapter,
            number,
            callback,
            callback_arg,
            flags,
        )
    };
    report(error, result)
}

/// # Safety
/// `interrupt` is a live interrupt handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIRemoveDataInterrupt(
    interrupt: *mut Intr,
    flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract.
    report(error, unsafe { remove_interrupt(interrupt, flags) })
}

/// # Safety
/// `interrupt` is a live interrupt handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIRemoveInterrupt(
    interrupt: *mut Intr,
    flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract.
    report(error, unsafe { remove_interrupt(interrupt, flags) })
}

/// # Safety
/// `interrupt` is a live interrupt handle.
#[no_mangle]
pub unsafe extern "C" fn SCIWaitForInterrupt(
    interrupt: *mut Intr,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract. A clone: a remove meanwhile frees nothing used here.
        let intr = Arc::clone(unsafe { object(interrupt, "the interrupt") }?);
        intr.wait((timeout != SCI_INFINITE_TIMEOUT).then_some(timeout))
            .map(drop)
    })();
    report(error, result)
}

/// # Safety
/// `interrupt` is a live interrupt handle; `data` holds `*length` bytes.
#[no_mangle]
pub unsafe extern "C" fn SCIWaitForDataInterrupt(
    interrupt: *mut Intr,
    data: *mut c_void,
    length: *mut c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract. A clone: a remove meanwhile frees nothing used here.
        let intr = Arc::clone(unsafe { object(interrupt, "the interrupt") }?);
        if length.is_null() || data.is_null() {
            return Err(illegal("data or length"));
        }
        let timeout = (timeout != SCI_INFINITE_TIMEOUT).then_some(timeout);
        let message = intr.wait(timeout)?;
        // SAFETY: checked non-null.
        let room = unsafe { length.read() } as usize;
        // SAFETY: checked non-null.
        unsafe { length.write(message.len() as c_uint) };
        if message.len() > room {
            return Err(Failure::new(
                code::OUT_OF_RANGE,
                format!("a {}-byte message for a {room}-byte buffer", message.len()),
            ));
        }
        // SAFETY: the program's buffer holds `room` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(message.as_ptr(), data.cast::<u8>(), message.len())
        };
        Ok(())
    })();
    report(error, result)
}

/// # Safety
/// `sd` is a live descriptor; `interrupt` is where the program wants the handle.
#[no_mangle]
pub unsafe extern "C" fn SCIConnectDataInterrupt(
    sd: *mut Desc,
    interrupt: *mut *mut RemoteInterrupt,
    node_id: c_uint,
    adapter: c_uint,
    number: c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        need(interrupt, "interrupt")?;
        // SAFETY: the caller's contract.
        let desc = unsafe { object(sd, "the descriptor") }?;
        let remote = retry(timeout, || {
            RemoteInterrupt::connect(&desc.0, node_id, adapter, number)
        })?;
        // SAFETY: the caller's contract.
        unsafe { hand_out(interrupt, remote) }
    })();
    report(error, result)
}

/// # Safety
/// `interrupt` is a live connection handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIDisconnectDataInterrupt(
    interrupt: *mut RemoteInterrupt,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = flags_only(flags, 0).and_then(|()| {
        // SAFETY: the caller's contract.
        unsafe { free_after(interrupt, "the interrupt", RemoteInterrupt::disconnect) }
    });
    report(error, result)
}

/// # Safety
/// `interrupt` is a live connection handle; `data` holds `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn SCITriggerDataInterrupt(
    interrupt: *mut RemoteInterrupt,
    data: *mut c_void,
    length: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let remote = unsafe { object(interrupt, "the interrupt") }?;
        let payload = if length == 0 {
            &[][..]
        } else if data.is_null() {
            return Err(illegal("data"));
        } else {
            // SAFETY: the program's buffer holds `length` bytes.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length as usize) }
        };
        remote.trigger(payload)
    })();
    report(error, result)
}

/// `sci_smartio_device_info_t`.
#[repr(C)]
pub struct DeviceInfo {
    fdid: u32,
    adapter: c_uint,
    nodeid: c_uint,
    pci_class: u32,
    pci_vendor_id: u16,
    pci_device_id: u16,
    user_name: [c_char; 64],
}

impl DeviceInfo {
    fn of(d: &smartio_live::protocol::DeviceEntry) -> DeviceInfo {
        let mut user_name = [0 as c_char; 64];
        for (to, from) in user_name.iter_mut().zip(d.name.bytes().take(63)) {
            *to = from as c_char;
        }
        DeviceInfo {
            fdid: d.fdid,
            adapter: 0,
            nodeid: d.node_id,
            pci_class: d.class,
            pci_vendor_id: d.vendor,
            pci_device_id: d.device,
            user_name,
        }
    }

    /// Whether `d` matches this record as a filter (fields left 0 match any).
    fn admits(&self, d: &smartio_live::protocol::DeviceEntry) -> bool {
        (self.fdid == 0 || self.fdid == d.fdid)
            && (self.nodeid == 0 || self.nodeid == d.node_id)
            && (self.pci_class == 0 || self.pci_class == d.class)
            && (self.pci_vendor_id == 0 || self.pci_vendor_id == d.vendor)
            && (self.pci_device_id == 0 || self.pci_device_id == d.device)
    }
}

/// `sci_smartio_query_device_t`.
#[repr(C)]
pub struct QueryDevice {
    fdid: u32,
    subcommand: c_uint,
    data: *mut c_void,
}

/// # Safety
/// `sd` is a live descriptor; `fdids` holds `length` entries; `filter` is null or a record.
#[no_mangle]
pub unsafe extern "C" fn SCIGetDeviceList(
    sd: *mut Desc,
    fdids: *mut u32,
    length: c_uint,
    filter: *const DeviceInfo,
    flags: c_uint,
    error: *mut SciError,
) -> c_uint {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let desc = unsafe { object(sd, "the descriptor") }?;
        if fdids.is_null() && length > 0 {
            return Err(illegal("fdids"));
        }
        // SAFETY: null or the program's record.
        let filter = unsafe { filter.as_ref() };
        let found: Vec<u32> = desc
            .0
            .devices()?
            .iter()
            .filter(|d| filter.is_none_or(|f| f.admits(d)))
            .map(|d| d.fdid)
            .take(length as usize)
            .collect();
        // SAFETY: the program's array holds `length` entries; `found` has no more.
        unsafe { std::ptr::copy_nonoverlapping(found.as_ptr(), fdids, found.len()) };
        Ok(found.len() as c_uint)
    })();
    match result {
        Ok(n) => {
            report(error, Ok(()));
            n
        }
        Err(f) => {
            report(error, Err(f));
            0
        }
    }
}

/// # Safety
/// `sd` is a live descriptor; `device` is where the program wants the handle.
#[no_mangle]
pub unsafe extern "C" fn SCIBorrowDevice(
    sd: *mut Desc,
    device: *mut *mut Device,
    fdid: u32,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, SCI_FLAG_EXCLUSIVE)?;
        need(device, "device")?;
        // SAFETY: the caller's contract.
        let desc = unsafe { object(sd, "the descriptor") }?;
        let borrowed = Device::borrow(&desc.0, fdid, flags & SCI_FLAG_EXCLUSIVE != 0)?;
        // SAFETY: the caller's contract.
        unsafe { hand_out(device, borrowed) }
    })();
    report(error, result)
}

/// # Safety
/// `device` is a live device handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIReturnDevice(device: *mut Device, flags: c_uint, error: *mut SciError) {
    let result = flags_only(flags, 0)
        // SAFETY: the caller's contract.
        .and_then(|()| unsafe { free_after(device, "the device", Device::give_back) });
    report(error, result)
}

/// # Safety
/// `device` is a live device handle (or null: 0).
#[no_mangle]
pub unsafe extern "C" fn SCIGetFabricDeviceId(device: *mut Device) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { object(device, "the device") }.map_or(0, |d| d.fdid)
}

/// # Safety
/// `device` is a live device handle.
#[no_mangle]
pub unsafe extern "C" fn SCICreateDeviceSegment(
    device: *mut Device,
    segment_id: c_uint,
    size: usize,
    memtype: c_uint,
    hints: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let d = unsafe { object(device, "the device") }?;
        d.create_segment(segment_id, size as u64, memtype, hints)
    })();
    report(error, result)
}

/// # Safety
/// `device` is a live device handle; `segment` is where the program wants the handle.
#[no_mangle]
pub unsafe extern "C" fn SCIConnectDeviceSegment(
    device: *mut Device,
    segment: *mut *mut RemoteSegment,
    segment_id: c_uint,
    memtype: c_uint,
    _callback: *const c_void,
    _callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, SCI_FLAG_USE_CALLBACK)?;
        need(segment, "segment")?;
        // SAFETY: the caller's contract.
        let d = unsafe { object(device, "the device") }?;
        let remote = d.connect_segment(segment_id, memtype)?;
        // SAFETY: the caller's contract.
        unsafe { hand_out(segment, remote) }
    })();
    report(error, result)
}

/// Maps the segment behind `handle` for `device` and writes the address to `address`.
///
/// # Safety
/// `device` is a live device handle; `address` is where the program wants the address.
unsafe fn map_for_device(
    device: *mut Device,
    handle: Result<u64, Failure>,
    address: *mut u64,
    offset: usize,
    size: usize,
) -> Result<(), Failure> {
    // SAFETY: the caller's contract.
    let d = unsafe { object(device, "the device") }?;
    if address.is_null() {
        return Err(illegal("address"));
    }
    let addr = d.map(handle?, offset as u64, size as u64)?;
    // SAFETY: checked non-null.
    unsafe { address.write(addr) };
    Ok(())
}

/// # Safety
/// `segment` and `device` are live handles; `address` is where the address goes.
#[no_mangle]
pub unsafe extern "C" fn SCIMapLocalSegmentForDevice(
    segment: *mut Seg,
    _adapter: c_uint,
    device: *mut Device,
    address: *mut u64,
    offset: usize,
    size: usize,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = flags_only(flags, 0).and_then(|()| {
        // SAFETY: the caller's contract.
        let handle = unsafe { backed(segment) }.map(|s| s.handle);
        // SAFETY: the caller's contract.
        unsafe { map_for_device(device, handle, address, offset, size) }
    });
    report(error, result)
}

/// # Safety
/// `segment` and `device` are live handles; `address` is where the address goes.
#[no_mangle]
pub unsafe extern "C" fn SCIMapRemoteSegmentForDevice(
    segment: *mut RemoteSegment,
    device: *mut Device,
    address: *mut u64,
    offset: usize,
    size: usize,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = flags_only(flags, 0).and_then(|()| {
        // SAFETY: the caller's contract.
        let handle = unsafe { object(segment, "the remote segment") }.map(|s| s.handle);
        // SAFETY: the caller's contract.
        unsafe { map_for_device(device, handle, address, offset, size) }
    });
    report(error, result)
}

/// # Safety
/// `segment` and `device` are live handles.
#[no_mangle]
pub unsafe extern "C" fn SCIUnmapLocalSegmentForDevice(
    segment: *mut Seg,
    _adapter: c_uint,
    device: *mut Device,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let handle = unsafe { backed(segment) }?.handle;
        // SAFETY: the caller's contract.
        unsafe { object(device, "the device") }?.unmap(handle)
    })();
    report(error, result)
}

/// # Safety
/// `segment` and `device` are live handles.
#[no_mangle]
pub unsafe extern "C" fn SCIUnmapRemoteSegmentForDevice(
    segment: *mut RemoteSegment,
    device: *mut Device,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let handle = unsafe { object(segment, "the remote segment") }?.handle;
        // SAFETY: the caller's contract.
        unsafe { object(device, "the device") }?.unmap(handle)
    })();
    report(error, result)
}

/// # Safety
/// `sd` is a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn SCIRegisterPCIeRequester(
    sd: *mut Desc,
    _adapter: c_uint,
    bus: c_uint,
    devfn: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, SCI_FLAG_PCIE_REQUESTER_GLOBAL)?;
        // SAFETY: the caller's contract.
        unsafe { object(sd, "the descriptor") }?
            .0
            .register_requester(bus, devfn)
    })();
    report(error, result)
}

/// # Safety
/// `sd` is a live descriptor.
#[no_mangle]
pub unsafe extern "C" fn SCIUnregisterPCIeRequester(
    sd: *mut Desc,
    _adapter: c_uint,
    bus: c_uint,
    devfn: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, SCI_FLAG_PCIE_REQUESTER_GLOBAL)?;
        // SAFETY: the caller's contract.
        unsafe { object(sd, "the descriptor") }?
            .0
            .unregister_requester(bus, devfn)
    })();
    report(error, result)
}

/// # Safety
/// `sd` is a live descriptor; `interrupt` is where the program wants the handle.
#[no_mangle]
pub unsafe extern "C" fn SCIConnectInterrupt(
    sd: *mut Desc,
    interrupt: *mut *mut RemoteInterrupt,
    node_id: c_uint,
    adapter: c_uint,
    number: c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract (the same call: a plain interrupt is a data interrupt
    // whose messages are empty).
    unsafe {
        SCIConnectDataInterrupt(
            sd, interrupt, node_id, adapter, number, timeout, flags, error,
        )
    }
}

/// # Safety
/// `interrupt` is a live connection handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIDisconnectInterrupt(
    interrupt: *mut RemoteInterrupt,
    flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract.
    unsafe { SCIDisconnectDataInterrupt(interrupt, flags, error) }
}

/// # Safety
/// `interrupt` is a live connection handle.
#[no_mangle]
pub unsafe extern "C" fn SCITriggerInterrupt(
    interrupt: *mut RemoteInterrupt,
    flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract; an empty message needs no buffer.
    unsafe { SCITriggerDataInterrupt(interrupt, std::ptr::null_mut(), 0, flags, error) }
}

/// # Safety
/// `map` is a live map handle; `source` holds `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn SCIMemCpy(
    _sequence: *mut Sequence,
    source: *mut c_void,
    map: *mut Map,
    offset: usize,
    size: usize,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let map = unsafe { object(map, "the map") }?;
        if size as u64 > map.len || offset as u64 > map.len - size as u64 {
            return Err(Failure::new(
                code::OUT_OF_RANGE,
                format!("{size} bytes at {offset} of a {}-byte map", map.len),
            ));
        }
        if size == 0 {
            return Ok(());
        }
        if source.is_null() {
            return Err(illegal("the source"));
        }
        // SAFETY: the program's buffer holds `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(source.cast::<u8>(), size) };
        map.write(offset as u64, bytes);
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    })();
    report(error, result)
}

#[no_mangle]
pub extern "C" fn SCICacheSync(
    _map: *mut Map,
    _addr: *mut c_void,
    _size: usize,
    _flags: c_uint,
    error: *mut SciError,
) {
    // Shared memory between processes of one machine is cache coherent: ordering is all
    // there is to do.
    std::sync::atomic::fence(Ordering::SeqCst);
    report(error, Ok(()))
}
