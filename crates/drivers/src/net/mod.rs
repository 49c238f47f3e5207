//! Networking in the host OS model: what a transport needs from a network interface
//! ([`FrameLink`]), so the same transport runs over any NIC driver — bound to a physical or a
//! virtual function, local or borrowed — and over test links.

pub mod congestion;
pub mod connection;
pub mod rtt;
pub mod segment;
pub mod stack;
pub mod stream;
pub mod wire;

#[cfg(test)]
mod tests;

use smartio_devices::ethernet::MacAddr;
use smartio_platform::AccessError;
use std::future::Future;
use thiserror::Error;

/// Why a frame could not be sent or received.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LinkError {
    /// The payload is larger than the interface's MTU.
    #[error("frame payload of {len} bytes exceeds the MTU of {mtu} bytes")]
    TooLarge {
        /// Payload bytes given.
        len: usize,
        /// The interface's MTU.
        mtu: usize,
    },
    /// The interface cannot reach its device any more (its function was removed, its path
    /// went down); fatal for the interface.
    #[error("network interface {interface} is gone: {reason}")]
    Gone {
        /// The interface.
        interface: String,
        /// The access that found it gone.
        reason: AccessError,
    },
}

/// A network interface as a transport sees it: Ethernet frames out and in.
///
/// Frames are whole buffers as the NIC DMAs them: the 14-byte header
/// ([`smartio_devices::ethernet::FrameHeader`]) followed by at most [`FrameLink::mtu`] payload
/// bytes; the NIC adds preamble, padding and FCS on the wire. Sending completes when the
/// frame is queued to the device (it waits while the transmit ring is full), not when it is on
/// the wire. Frames of one flow — one destination and the same first four payload bytes (a
/// transport's ports) — arrive in the order they were sent, or not at all; different flows
/// may overtake each other. Several tasks may send at once (each frame is queued whole); one
/// task receives.
pub trait FrameLink {
    /// The interface's own address.
    fn mac(&self) -> MacAddr;

    /// Largest payload per frame.
    fn mtu(&self) -> usize;

    /// Queues `frame` for transmission.
    fn send(&self, frame: Vec<u8>) -> impl Future<Output = Result<(), LinkError>>;

    /// The next frame received for this interface.
    fn recv(&self) -> impl Future<Output = Result<Vec<u8>, LinkError>>;
}
