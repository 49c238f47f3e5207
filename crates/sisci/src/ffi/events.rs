//! Segment events from C: `SCIWaitForLocalSegmentEvent`, `SCIWaitForRemoteSegmentEvent`,
//! and the callbacks `SCICreateSegment` and `SCIConnectSegment` take with
//! `SCI_FLAG_USE_CALLBACK`, called on a thread of the library (as Dolphin's are) until they
//! answer `SCI_CALLBACK_CANCEL` or the segment or connection goes.

use super::{illegal, object, report, SciError, Seg, SCI_CALLBACK_CANCEL, SCI_INFINITE_TIMEOUT};
use crate::client::{Descriptor, Failure, RemoteSegment, SegmentEvent};
use crate::code;
use smartio_live::protocol::Handle;
use std::ffi::{c_uint, c_void};
use std::sync::Arc;

/// `sci_cb_local_segment_t`.
pub type LocalSegmentCallback = extern "C" fn(
    arg: *mut c_void,
    segment: *mut Seg,
    reason: c_uint,
    node_id: c_uint,
    adapter: c_uint,
    error: SciError,
) -> c_uint;

/// `sci_cb_remote_segment_t`.
pub type RemoteSegmentCallback = extern "C" fn(
    arg: *mut c_void,
    segment: *mut RemoteSegment,
    reason: c_uint,
    status: SciError,
) -> c_uint;

/// How long a callback thread waits at a time before it looks again.
const LOOK_MS: u32 = 50;

/// A program's segment callback and what it is passed back.
pub(crate) enum SegmentCallback {
    /// For a local segment.
    Local(LocalSegmentCallback, *mut c_void, *mut Seg),
    /// For a connection.
    Remote(RemoteSegmentCallback, *mut c_void, *mut RemoteSegment),
}

// SAFETY: SISCI calls callbacks on a thread of the library; the program that registers one
// promises its argument may be used there. The handle is only passed back to the program.
unsafe impl Send for SegmentCallback {}

impl SegmentCallback {
    /// Calls back for every event of `handle` until the callback cancels or the object goes
    /// (its waits are then refused), on a thread of its own.
    pub(crate) fn serve(self, desc: Arc<Descriptor>, handle: Handle) -> Result<(), Failure> {
        std::thread::Builder::new()
            .name("sisci-segment-callback".into())
            .spawn(move || {
                let callback = self;
                loop {
                    match desc.wait_segment_event(handle, Some(LOOK_MS)) {
                        Ok(e) => {
                            let action = match callback {
                                SegmentCallback::Local(cb, arg, seg) => {
                                    cb(arg, seg, e.reason, e.node_id, e.adapter, code::OK)
                                }
                                SegmentCallback::Remote(cb, arg, seg) => {
                                    cb(arg, seg, e.reason, code::OK)
                                }
                            };
                            if action == SCI_CALLBACK_CANCEL {
                                break;
                            }
                        }
                        Err(f) if f.code == code::TIMEOUT => {}
                        Err(_) => break,
                    }
                }
            })
            .map(drop)
            .map_err(|e| Failure::new(code::SYSTEM, format!("no thread for the callback: {e}")))
    }
}

/// Waits for an event of `handle`.
fn wait(desc: &Descriptor, handle: Handle, timeout: c_uint) -> Result<SegmentEvent, Failure> {
    desc.wait_segment_event(handle, (timeout != SCI_INFINITE_TIMEOUT).then_some(timeout))
}

/// # Safety
/// `segment` is a live segment handle; `node_id` and `adapter` are null or where the
/// program wants the event's node id and adapter.
#[no_mangle]
pub unsafe extern "C" fn SCIWaitForLocalSegmentEvent(
    segment: *mut Seg,
    node_id: *mut c_uint,
    adapter: *mut c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) -> c_uint {
    let result = (|| {
        super::flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let seg = unsafe { object(segment, "the segment") }?;
        let local = seg.memory()?;
        let e = wait(&seg.desc, local.handle(), timeout)?;
        // SAFETY: null or the program's, the caller's contract.
        unsafe {
            if let Some(n) = node_id.as_mut() {
                *n = e.node_id;
            }
            if let Some(a) = adapter.as_mut() {
                *a = e.adapter;
            }
        }
        Ok(e.reason)
    })();
    reason_of(error, result)
}

/// # Safety
/// `segment` is a live connection handle; `status` is null or where the program wants the
/// event's status.
#[no_mangle]
pub unsafe extern "C" fn SCIWaitForRemoteSegmentEvent(
    segment: *mut RemoteSegment,
    status: *mut SciError,
    timeout: c_uint,
    flags: c_uint,
    error: *mut SciError,
) -> c_uint {
    let result = (|| {
        super::flags_only(flags, 0)?;
        // SAFETY: the caller's contract.
        let remote = unsafe { object(segment, "the remote segment") }?;
        let e = wait(remote.descriptor(), remote.handle, timeout)?;
        // SAFETY: null or the program's, the caller's contract.
        if let Some(s) = unsafe { status.as_mut() } {
            *s = code::OK;
        }
        Ok(e.reason)
    })();
    reason_of(error, result)
}

/// The reason a wait returns (0 after a failure), its outcome reported in `error`.
fn reason_of(error: *mut SciError, result: Result<c_uint, Failure>) -> c_uint {
    match result {
        Ok(reason) => {
            report(error, Ok(()));
            reason
        }
        Err(f) => {
            report(error, Err(f));
            0
        }
    }
}

/// The callback of a segment call with `SCI_FLAG_USE_CALLBACK` (`None` without the flag);
/// the flag without a callback is `SCI_ERR_ILLEGAL_PARAMETER`.
pub(crate) fn chosen<T>(flags: c_uint, callback: Option<T>) -> Result<Option<T>, Failure> {
    match (flags & super::SCI_FLAG_USE_CALLBACK != 0, callback) {
        (true, Some(cb)) => Ok(Some(cb)),
        (true, None) => Err(illegal("the callback")),
        (false, _) => Ok(None),
    }
}
