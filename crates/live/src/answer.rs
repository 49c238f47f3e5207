//! What a request's handler gives back: the reply, and the memory file that goes with a map.

use crate::protocol::{Handle, Reply};
use smartio_fabric::{EndpointId, HostId};

/// Which memory file a map's reply carries.
pub(crate) enum FileOf {
    /// A host's RAM.
    Ram(HostId),
    /// A device BAR's register page.
    Page(EndpointId, u8),
    /// A broadcast map's window, by the map's id ([`crate::reflect`]).
    Window(u32),
}

/// A request's answer: the reply, and the memory file that goes with it.
pub(crate) type Answer = Option<(Reply, Option<FileOf>)>;

/// The answer to a map: the reply and the memory file it hands out.
pub(crate) fn mapped(handle: Handle, offset: u64, len: u64, file: FileOf) -> Answer {
    Some((
        Reply::Mapped {
            handle,
            offset,
            len,
        },
        Some(file),
    ))
}

/// An error reply: SISCI's error `code` and the message.
pub(crate) fn error_reply(code: u32, message: String) -> Reply {
    Reply::Error { code, message }
}
