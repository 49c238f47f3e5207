//! Namespace storage: where the blocks of a controller's namespaces live.
//!
//! Sparse memory by default (unwritten blocks read as zero); or one file holding every
//! namespace back to back, so data persists between runs. A file's writes land in the page
//! cache; [`NamespaceStore::flush`] (the NVMe Flush command) makes them durable with
//! `fdatasync`, and a hook ([`NamespaceStore::on_sync`]) sees every such sync.

use smartio_platform::SparseMemory;
use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Why a backing file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("namespace backing file {path}: {source}")]
pub struct BackingError {
    /// The file.
    pub path: PathBuf,
    /// What the OS said.
    #[source]
    pub source: std::io::Error,
}

/// A copy says what the OS said (its kind and message; an OS error's number is in the
/// message), so an error that carries this one can be cloned.
impl Clone for BackingError {
    fn clone(&self) -> BackingError {
        BackingError {
            path: self.path.clone(),
            source: std::io::Error::new(self.source.kind(), self.source.to_string()),
        }
    }
}

/// Equal when about the same file with the same kind and message.
impl PartialEq for BackingError {
    fn eq(&self, other: &BackingError) -> bool {
        self.path == other.path
            && self.source.kind() == other.source.kind()
            && self.source.to_string() == other.source.to_string()
    }
}

impl Eq for BackingError {}

#[derive(Debug)]
enum Store {
    Sparse(SparseMemory),
    File { file: File, path: PathBuf },
}

/// What runs before each `fdatasync` of a file-backed store; an error it returns is the
/// sync's error (the file is then not synced). For tests: to count syncs, and to make one
/// fail as a failing disk would.
pub struct SyncHook(Box<dyn Fn() -> std::io::Result<()>>);

impl std::fmt::Debug for SyncHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SyncHook")
    }
}

/// The blocks of every namespace of one controller.
#[derive(Debug)]
pub struct NamespaceStore {
    store: RefCell<Store>,
    /// Bytes per namespace.
    capacity: u64,
    count: u32,
    /// The first I/O error of a file-backed store, for the error log.
    io_error: RefCell<Option<String>>,
    /// Runs before each sync of a file-backed store.
    sync_hook: RefCell<Option<SyncHook>>,
}

impl NamespaceStore {
    /// `count` namespaces of `capacity` bytes in sparse memory.
    pub fn sparse(count: u32, capacity: u64) -> Self {
        Self {
            store: RefCell::new(Store::Sparse(SparseMemory::new())),
            capacity,
            count,
            io_error: RefCell::new(None),
            sync_hook: RefCell::new(None),
        }
    }

    /// `count` namespaces of `capacity` bytes in the file at `path` (created if missing,
    /// sized sparsely to hold them all; existing contents are kept).
    pub fn file(path: &Path, count: u32, capacity: u64) -> Result<Self, BackingError> {
        let err = |source| BackingError {
            path: path.to_path_buf(),
            source,
        };
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(err)?;
        let need = capacity * u64::from(count);
        if file.metadata().map_err(err)?.len() < need {
            file.set_len(need).map_err(err)?;
        }
        Ok(Self {
            store: RefCell::new(Store::File {
                file,
                path: path.to_path_buf(),
            }),
            capacity,
            count,
            io_error: RefCell::new(None),
            sync_hook: RefCell::new(None),
        })
    }

    /// Bytes per namespace.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Number of namespaces (ids 1..=count).
    pub fn count(&self) -> u32 {
        self.count
    }

    fn base(&self, nsid: u32) -> u64 {
        u64::from(nsid.saturating_sub(1)) * self.capacity
    }

    /// Reads `buf.len()` bytes at byte `offset` of namespace `nsid`. Caller checks bounds.
    pub fn read(&self, nsid: u32, offset: u64, buf: &mut [u8]) -> Result<(), BackingError> {
        let at = self.base(nsid) + offset;
        match &*self.store.borrow() {
            Store::Sparse(m) => {
                m.read(at, buf);
                Ok(())
            }
            Store::File { file, path } => read_at(file, at, buf).map_err(|e| self.io(path, e)),
        }
    }

    /// Whether the `len` bytes at byte `offset` of namespace `nsid` were never written (or
    /// all deallocated), so they read as zeroes without reading them: only a store in memory
    /// knows (a backing file is read). Caller checks bounds.
    pub fn reads_as_zero(&self, nsid: u32, offset: u64, len: u64) -> bool {
        match &*self.store.borrow() {
            Store::Sparse(m) => m.is_unwritten(self.base(nsid) + offset, len),
            Store::File { .. } => false,
        }
    }

    /// The `len` bytes at byte `offset` of namespace `nsid`, into `out` (emptied first; not
    /// zeroed first when the store is memory). Caller checks bounds.
    pub fn read_into(
        &self,
        nsid: u32,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), BackingError> {
        let at = self.base(nsid) + offset;
        match &*self.store.borrow() {
            Store::Sparse(m) => {
                out.clear();
                m.read_append(at, len, out);
                Ok(())
            }
            Store::File { file, path } => {
                out.clear();
                out.resize(len, 0);
                read_at(file, at, out).map_err(|e| self.io(path, e))
            }
        }
    }

    /// Writes `data` at byte `offset` of namespace `nsid`. Caller checks bounds.
    pub fn write(&self, nsid: u32, offset: u64, data: &[u8]) -> Result<(), BackingError> {
        let at = self.base(nsid) + offset;
        match &mut *self.store.borrow_mut() {
            Store::Sparse(m) => {
                m.write(at, data);
                Ok(())
            }
            Store::File { file, path } => write_at(file, at, data).map_err(|e| self.io(path, e)),
        }
    }

    /// Zeroes `len` bytes at byte `offset` of namespace `nsid` (Write Zeroes, deallocation):
    /// sparse memory gives whole pages back; a file gets zeroes written (correct, but a large
    /// discard fills in that much of a sparse file and takes the time to write it: punching
    /// holes needs a system call std does not offer). Caller checks bounds.
    pub fn zero(&self, nsid: u32, offset: u64, len: u64) -> Result<(), BackingError> {
        let at = self.base(nsid) + offset;
        match &mut *self.store.borrow_mut() {
            Store::Sparse(m) => {
                m.zero(at, len);
                Ok(())
            }
            Store::File { file, path } => {
                let zeroes = vec![0u8; len.min(1 << 20) as usize];
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(zeroes.len() as u64);
                    write_at(file, at + done, &zeroes[..n as usize])
                        .map_err(|e| self.io(path, e))?;
                    done += n;
                }
                Ok(())
            }
        }
    }

    /// Makes written data durable: a file-backed store calls `fdatasync` (after the
    /// [`on_sync`](Self::on_sync) hook, if any), so what was written survives a power loss
    /// once this returns `Ok`; memory has nothing to make durable beyond the process.
    pub fn flush(&self) -> Result<(), BackingError> {
        match &*self.store.borrow() {
            Store::Sparse(_) => Ok(()),
            Store::File { file, path } => {
                let hook = self.sync_hook.borrow();
                let before = hook.as_ref().map_or(Ok(()), |h| (h.0)());
                before
                    .and_then(|()| file.sync_data())
                    .map_err(|e| self.io(path, e))
            }
        }
    }

    /// Runs `hook` before every `fdatasync` of a file-backed store from now on (replacing
    /// any earlier hook); see [`SyncHook`]. A memory store never syncs, so never runs it.
    pub fn on_sync(&self, hook: impl Fn() -> std::io::Result<()> + 'static) {
        *self.sync_hook.borrow_mut() = Some(SyncHook(Box::new(hook)));
    }

    /// A failed access to the backing file at `path`; the first is kept for the error log.
    fn io(&self, path: &Path, source: std::io::Error) -> BackingError {
        self.io_error
            .borrow_mut()
            .get_or_insert_with(|| format!("{}: {source}", path.display()));
        BackingError {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(unix)]
fn read_at(file: &File, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

#[cfg(unix)]
fn write_at(file: &File, at: u64, data: &[u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, data, at)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(buf)
}

#[cfg(not(unix))]
fn write_at(mut file: &File, at: u64, data: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(at))?;
    file.write_all(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for test `name` and the path of a backing file in it.
    fn scratch(name: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("smartio-ns-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("ns.img");
        let _ = std::fs::remove_file(&path);
        (dir, path)
    }

    #[test]
    fn namespaces_are_separate_and_a_file_keeps_its_data() {
        let (dir, path) = scratch("keep");
        {
            let s = NamespaceStore::file(&path, 2, 1 << 20).expect("create");
            s.write(1, 512, b"first").expect("write");
            s.write(2, 512, b"second").expect("write");
            s.flush().expect("flush");
        }
        let s = NamespaceStore::file(&path, 2, 1 << 20).expect("reopen");
        let mut b = [0u8; 6];
        s.read(2, 512, &mut b).expect("read");
        assert_eq!(&b, b"second");
        s.read(1, 512, &mut b[..5]).expect("read");
        assert_eq!(&b[..5], b"first");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn zeroing_clears_only_its_range_of_its_namespace_in_memory_and_in_a_file() {
        let (dir, path) = scratch("zero");
        let stores = [
            NamespaceStore::sparse(2, 1 << 20),
            NamespaceStore::file(&path, 2, 1 << 20).expect("create"),
        ];
        for s in &stores {
            let data = vec![0xa5u8; 3 * 4096];
            s.write(1, 4096, &data).expect("write");
            s.write(2, 4096, &data).expect("write");
            // Part of a page, a whole page, part of the next.
            s.zero(2, 4096 + 1000, 2 * 4096).expect("zero");
            let mut got = vec![0u8; 3 * 4096];
            s.read(2, 4096, &mut got).expect("read");
            let mut expected = data.clone();
            expected[1000..1000 + 2 * 4096].fill(0);
            assert_eq!(got, expected);
            s.read(1, 4096, &mut got).expect("read");
            assert_eq!(got, data, "namespace 1 keeps its data");
        }
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_file_store_syncs_once_per_flush_and_a_failed_sync_names_the_file() {
        use std::cell::Cell;
        use std::rc::Rc;
        let (dir, path) = scratch("sync");
        let file = NamespaceStore::file(&path, 1, 1 << 20).expect("create");
        let memory = NamespaceStore::sparse(1, 1 << 20);
        let syncs = Rc::new(Cell::new(0u32));
        for s in [&file, &memory] {
            let n = syncs.clone();
            s.on_sync(move || {
                n.set(n.get() + 1);
                Ok(())
            });
        }
        file.write(1, 0, b"data").expect("write");
        assert_eq!(syncs.get(), 0, "a write does not sync");
        file.flush().expect("flush");
        file.flush().expect("flush");
        memory.flush().expect("flush");
        assert_eq!(
            syncs.get(),
            2,
            "one sync per flush of the file, none of memory"
        );
        file.on_sync(|| Err(std::io::Error::other("the disk is gone")));
        let e = file.flush().expect_err("the sync failed");
        assert_eq!(e.path, path);
        assert_eq!(e.source.to_string(), "the disk is gone");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_read_past_the_end_of_the_backing_file_names_the_file() {
        let (dir, path) = scratch("short");
        let s = NamespaceStore::file(&path, 1, 4096).expect("create");
        let mut b = [0u8; 16];
        // The caller checks bounds; the store reports what the file system says.
        let e = s.read(2, 0, &mut b).expect_err("beyond the file");
        assert_eq!(e.path, path);
        assert_eq!(e.source.kind(), std::io::ErrorKind::UnexpectedEof);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_new_file_is_sized_for_every_namespace_and_a_larger_one_is_kept() {
        let (dir, path) = scratch("size");
        let s = NamespaceStore::file(&path, 3, 1 << 20).expect("create");
        assert_eq!((s.capacity(), s.count()), (1 << 20, 3));
        let len = |p: &Path| std::fs::metadata(p).expect("the file").len();
        assert_eq!(len(&path), 3 << 20);
        drop(s);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(5 << 20))
            .expect("grown");
        let s = NamespaceStore::file(&path, 2, 1 << 20).expect("reopen");
        assert_eq!(len(&path), 5 << 20, "not cut");
        assert!(format!("{s:?}").contains("File"));
        s.on_sync(|| Ok(()));
        assert!(format!("{s:?}").contains("SyncHook"), "{s:?}");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn zeroing_more_than_a_chunk_of_a_file_clears_exactly_its_range() {
        let (dir, path) = scratch("zero-big");
        let s = NamespaceStore::file(&path, 1, 4 << 20).expect("create");
        let data = vec![0xa5u8; 3 << 20];
        s.write(1, 0, &data).expect("write");
        let (at, len) = (4096u64, (3 << 19) as u64);
        s.zero(1, at, len).expect("zero");
        let mut got = vec![0u8; data.len()];
        s.read(1, 0, &mut got).expect("read");
        let mut want = data;
        want[at as usize..(at + len) as usize].fill(0);
        assert!(got == want, "only [{at}, {}) is zero", at + len);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn backing_errors_are_equal_only_for_the_same_file_kind_and_message() {
        let error = |path: &str, kind, message: &str| BackingError {
            path: PathBuf::from(path),
            source: std::io::Error::new(kind, message.to_string()),
        };
        use std::io::ErrorKind::{NotFound, PermissionDenied};
        let e = error("/a", NotFound, "gone");
        assert_eq!(e, error("/a", NotFound, "gone"));
        assert_eq!(e, e.clone());
        assert_ne!(e, error("/b", NotFound, "gone"));
        assert_ne!(e, error("/a", PermissionDenied, "gone"));
        assert_ne!(e, error("/a", NotFound, "moved"));
    }
}
