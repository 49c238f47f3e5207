//! The C calls of SISCI's DMA queues. The daemon checks a vector and runs it on the
//! adapter's DMA engine (`drivers::sisci_dma`); here the library checks what only it can
//! (pointers, the vector's length before it is copied) and carries out the flags that are
//! the library's: `SCI_FLAG_DMA_WAIT` (the start call waits) and `SCI_FLAG_USE_CALLBACK`
//! (a thread of the library waits and calls the program back, as Dolphin's does).

use super::{backed, flags_only, free_after, hand_out, illegal, need, object, report, SciError};
use crate::client::{DmaQueue, Failure, RemoteSegment};
use crate::code;
use crate::ffi::Seg;
use smartio_drivers::sisci_dma::{flag, QueueState, MAX_VECTOR};
use smartio_live::protocol::DmaEntry;
use std::ffi::{c_uint, c_void};
use std::sync::Arc;

/// A DMA queue's handle: shared with callback threads, so removing it while they wait
/// frees nothing they use.
pub type DmaQ = Arc<DmaQueue>;

/// `sci_cb_dma_t`.
pub type DmaCallback =
    extern "C" fn(arg: *mut c_void, queue: *mut DmaQ, status: SciError) -> c_uint;

/// `dis_dma_vec_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DisDmaVec {
    size: usize,
    local_offset: usize,
    remote_offset: usize,
    flags: c_uint,
}

/// The `sci_error_t` a queue's final state means for a callback or a waiting start.
fn status_of(state: u32) -> SciError {
    match QueueState::from_code(state) {
        Some(QueueState::Done | QueueState::Idle) => code::OK,
        Some(QueueState::Aborted) => code::CANCELLED,
        _ => code::TRANSFER_FAILED,
    }
}

/// What a callback thread needs of the C side.
struct DmaCallbackTarget {
    callback: DmaCallback,
    arg: *mut c_void,
    handle: *mut DmaQ,
}

// SAFETY: SISCI calls callbacks on a thread of the library; the program that registers one
// promises its argument may be used there. `handle` is only passed back to the program.
unsafe impl Send for DmaCallbackTarget {}

/// # Safety
/// `sd` is a live descriptor; `queue` is where the program wants the handle.
#[no_mangle]
pub unsafe extern "C" fn SCICreateDMAQueue(
    sd: *mut super::Desc,
    queue: *mut *mut DmaQ,
    adapter: c_uint,
    max_entries: c_uint,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        flags_only(flags, 0)?;
        need(queue, "dq")?;
        // SAFETY: the caller's contract.
        let desc = unsafe { object(sd, "the descriptor") }?;
        let made = DmaQueue::create(&desc.0, adapter, max_entries)?;
        // SAFETY: the caller's contract.
        unsafe { hand_out(queue, Arc::new(made)) }
    })();
    report(error, result)
}

/// # Safety
/// `queue` is a live queue handle; it is freed when this succeeds.
#[no_mangle]
pub unsafe extern "C" fn SCIRemoveDMAQueue(queue: *mut DmaQ, flags: c_uint, error: *mut SciError) {
    let result = flags_only(flags, 0)
        // SAFETY: the caller's contract.
        .and_then(|()| unsafe { free_after(queue, "the DMA queue", |q| q.remove()) });
    report(error, result)
}

/// # Safety
/// `queue` is a live queue handle.
#[no_mangle]
pub unsafe extern "C" fn SCIAbortDMAQueue(queue: *mut DmaQ, flags: c_uint, error: *mut SciError) {
    let result = flags_only(flags, 0)
        // SAFETY: the caller's contract.
        .and_then(|()| unsafe { object(queue, "the DMA queue") }?.abort());
    report(error, result)
}

/// # Safety
/// `queue` is a live queue handle (or null: `SCI_DMAQUEUE_ERROR`).
#[no_mangle]
pub unsafe extern "C" fn SCIDMAQueueState(queue: *mut DmaQ) -> c_uint {
    // SAFETY: the caller's contract.
    unsafe { object(queue, "the DMA queue") }
        .and_then(|q| q.state())
        .unwrap_or(QueueState::Error.code())
}

/// # Safety
/// `queue` is a live queue handle.
#[no_mangle]
pub unsafe extern "C" fn SCIWaitForDMAQueue(
    queue: *mut DmaQ,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) -> c_uint {
    let q = match flags_only(flags, 0)
        // SAFETY: the caller's contract.
        .and_then(|()| unsafe { object(queue, "the DMA queue") })
    {
        // A clone: a remove meanwhile frees nothing used here.
        Ok(q) => Arc::clone(q),
        Err(f) => {
            report(error, Err(f));
            return QueueState::Error.code();
        }
    };
    let timeout = (timeout != super::SCI_INFINITE_TIMEOUT).then_some(timeout);
    match q.wait(None, timeout) {
        Ok(state) => {
            report(error, Ok(()));
            state
        }
        Err(f) => {
            report(error, Err(f));
            q.state().unwrap_or(QueueState::Error.code())
        }
    }
}

/// Starts `entries` on the queue and carries out the library's flags.
///
/// # Safety
/// As for the C calls that use it.
#[allow(clippy::too_many_arguments)]
unsafe fn start(
    queue: *mut DmaQ,
    local: *mut Seg,
    remote: *mut RemoteSegment,
    entries: Vec<DmaEntry>,
    callback: Option<DmaCallback>,
    callback_arg: *mut c_void,
    flags: c_uint,
) -> Result<(), Failure> {
    if flags & !flag::START != 0 {
        return Err(Failure::new(
            code::ILLEGAL_FLAG,
            format!(
                "flags {:#x} are not taken by a DMA transfer",
                flags & !flag::START
            ),
        ));
    }
    // SAFETY: the caller's contract.
    let q = Arc::clone(unsafe { object(queue, "the DMA queue") }?);
    // SAFETY: the caller's contract.
    let local = unsafe { backed(local) }?;
    // SAFETY: the caller's contract.
    let remote = unsafe { object(remote, "the remote segment") }?;
    let callback = match (flags & flag::USE_CALLBACK != 0, callback) {
        (true, Some(cb)) => Some(cb),
        (true, None) => return Err(illegal("the callback")),
        (false, _) => None,
    };
    let daemon_flags = flags & !(flag::USE_CALLBACK | flag::DMA_WAIT);
    let end = q.start(local, remote, entries, daemon_flags)?;
    if flags & flag::DMA_WAIT != 0 {
        let state = q.wait(Some(end), None)?;
        if status_of(state) != code::OK {
            return Err(Failure::new(
                status_of(state),
                format!("the DMA transfer ended in queue state {state}"),
            ));
        }
    }
    if let Some(callback) = callback {
        let target = DmaCallbackTarget {
            callback,
            arg: callback_arg,
            handle: queue,
        };
        let waiter = Arc::clone(&q);
        std::thread::Builder::new()
            .name("sisci-dma-callback".into())
            .spawn(move || {
                let target = target;
                let status = match waiter.wait(Some(end), None) {
                    Ok(state) => status_of(state),
                    Err(f) => f.code,
                };
                (target.callback)(target.arg, target.handle, status);
            })
            .map_err(|e| Failure::new(code::SYSTEM, format!("no thread for the callback: {e}")))?;
    }
    Ok(())
}

/// # Safety
/// `queue`, `local` and `remote` are live handles; `callback`, if given, is a `sci_cb_dma_t`
/// whose argument may be used on another thread.
#[no_mangle]
pub unsafe extern "C" fn SCIStartDmaTransfer(
    queue: *mut DmaQ,
    local: *mut Seg,
    remote: *mut RemoteSegment,
    local_offset: usize,
    size: usize,
    remote_offset: usize,
    callback: Option<DmaCallback>,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) {
    let entry = DmaEntry {
        size: size as u64,
        local_offset: local_offset as u64,
        remote_offset: remote_offset as u64,
        flags: 0,
    };
    // SAFETY: the caller's contract.
    let result = unsafe {
        start(
            queue,
            local,
            remote,
            vec![entry],
            callback,
            callback_arg,
            flags,
        )
    };
    report(error, result)
}

/// # Safety
/// As for [`SCIStartDmaTransfer`]; `vector` holds `length` entries.
#[no_mangle]
pub unsafe extern "C" fn SCIStartDmaTransferVec(
    queue: *mut DmaQ,
    local: *mut Seg,
    remote: *mut RemoteSegment,
    length: usize,
    vector: *const DisDmaVec,
    callback: Option<DmaCallback>,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut SciError,
) {
    let result = (|| {
        if length > MAX_VECTOR {
            return Err(Failure::new(
                code::MAX_ENTRIES,
                format!(
                    "a DMA vector of {length} entries: at most {MAX_VECTOR} (DIS_DMA_MAX_VECLEN)"
                ),
            ));
        }
        if vector.is_null() && length > 0 {
            return Err(illegal("disDmaVec"));
        }
        let entries: Vec<DmaEntry> = if length == 0 {
            Vec::new()
        } else {
            // SAFETY: the program's vector holds `length` entries (checked non-null).
            unsafe { std::slice::from_raw_parts(vector, length) }
                .iter()
                .map(|v| DmaEntry {
                    size: v.size as u64,
                    local_offset: v.local_offset as u64,
                    remote_offset: v.remote_offset as u64,
                    flags: v.flags,
                })
                .collect()
        };
        // SAFETY: the caller's contract.
        unsafe { start(queue, local, remote, entries, callback, callback_arg, flags) }
    })();
    report(error, result)
}

/// # Safety
/// Dereferences nothing but `queue`, a live handle.
#[no_mangle]
pub unsafe extern "C" fn SCIStartDmaTransferMem(
    queue: *mut DmaQ,
    _local: *mut c_void,
    _remote: *mut RemoteSegment,
    _size: usize,
    _remote_offset: usize,
    _callback: Option<DmaCallback>,
    _callback_arg: *mut c_void,
    _flags: c_uint,
    error: *mut SciError,
) {
    // SAFETY: the caller's contract.
    let result = unsafe { object(queue, "the DMA queue") }.and_then(|_| {
        Err(Failure::new(
            code::NOT_IMPLEMENTED,
            "SCIStartDmaTransferMem: the adapter's DMA engine reaches segments, not a program's private memory; register the buffer as a segment (SCIRegisterSegmentMemory) and use SCIStartDmaTransfer",
        ))
    });
    report(error, result)
}
