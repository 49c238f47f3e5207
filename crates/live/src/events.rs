//! Segment events (`sci_segment_cb_reason_t`): what `SCIWaitForLocalSegmentEvent`,
//! `SCIWaitForRemoteSegmentEvent` and segment callbacks report.
//!
//! A local segment sees `SCI_CB_CONNECT` when a program connects to it and
//! `SCI_CB_DISCONNECT` when the connection ends — disconnected, or its program exited or
//! died — with the connecting adapter's node id and the segment's adapter it came through.
//! A connection sees `SCI_CB_LOST` when the segment's owner exits while it is connected (the
//! segment stays until the last connection ends, but nobody owns it). Events wait in a
//! queue per object (at most [`MAX_QUEUED`](crate::segment_events::MAX_QUEUED); older ones
//! are dropped) until a wait takes them; the queue goes with its object. The live engine
//! injects no link failures, so `SCI_CB_NOT_OPERATIONAL` and `SCI_CB_OPERATIONAL` do not
//! happen here.

use crate::answer::Answer;
use crate::daemon::Daemon;
use crate::handles::Scope;
use crate::objects::Object;
use crate::protocol::{Handle, Reply};
use crate::refusal::{Refused, RequestError};
use crate::segment_events::{Event, Reason};
use smartio_fabric::{HostId, LutTarget};
use smartio_platform::{Clock, SimDuration};
use smartio_smartio::sisci::{LocalSegment, RemoteSegment};
use smartio_smartio::SciError;
use std::rc::Rc;

/// How often a waiting call looks at its queue.
const EVENT_LOOK: SimDuration = SimDuration::from_us(200);

impl Daemon {
    /// The handle of the object recording `seg` (its owner's), if any.
    fn segment_handle(&self, seg: &LocalSegment) -> Option<Handle> {
        self.table
            .borrow()
            .objects
            .iter()
            .find(|(_, (_, o))| matches!(o, Object::Segment(s) if s == seg))
            .map(|(h, _)| *h)
    }

    /// The owner's segment a connection reaches, the connecting adapter's node id and the
    /// segment's adapter number it came through.
    fn connection_ends(&self, remote: &RemoteSegment) -> Option<(LocalSegment, u32, u32)> {
        let LutTarget::Adapter(far) = remote.target else {
            return None;
        };
        let seg = self.smartio.sisci().connected_segment(remote)?;
        let f = self.cluster.machine.fabric();
        Some((
            seg,
            f.adapter(remote.adapter).node_id.0,
            f.adapter(far).number,
        ))
    }

    /// A connection was made: its segment sees `SCI_CB_CONNECT`.
    pub(crate) fn note_connected(&self, remote: &RemoteSegment) {
        self.note_to_owner(remote, Reason::Connect);
    }

    /// A connection ends (before it does, while the model still knows what it reaches): its
    /// segment sees `SCI_CB_DISCONNECT`, once the caller's disconnect succeeded.
    pub(crate) fn disconnect_event(&self, remote: &RemoteSegment) -> Option<(Handle, Event)> {
        let (seg, node_id, adapter) = self.connection_ends(remote)?;
        Some((
            self.segment_handle(&seg)?,
            Event {
                reason: Reason::Disconnect,
                node_id,
                adapter,
            },
        ))
    }

    /// Queues `event` for `handle`.
    pub(crate) fn note(&self, (handle, event): (Handle, Event)) {
        self.segment_events.borrow_mut().push(handle, event);
    }

    fn note_to_owner(&self, remote: &RemoteSegment, reason: Reason) {
        if let Some((seg, node_id, adapter)) = self.connection_ends(remote) {
            if let Some(h) = self.segment_handle(&seg) {
                self.note((
                    h,
                    Event {
                        reason,
                        node_id,
                        adapter,
                    },
                ));
            }
        }
    }

    /// The owner of `seg` left while programs are connected to it: each connection sees
    /// `SCI_CB_LOST`.
    pub(crate) fn owner_left(&self, seg: &LocalSegment) {
        let sisci = self.smartio.sisci();
        let lost: Vec<(Handle, RemoteSegment)> = self
            .table
            .borrow()
            .objects
            .iter()
            .filter_map(|(h, (_, o))| match o {
                Object::Remote(r) if sisci.connected_segment(r).as_ref() == Some(seg) => {
                    Some((*h, *r))
                }
                _ => None,
            })
            .collect();
        let f = self.cluster.machine.fabric();
        for (h, r) in lost {
            let node_id = match r.target {
                LutTarget::Adapter(far) => f.adapter(far).node_id.0,
                LutTarget::Multicast(_) => 0,
            };
            let adapter = f.adapter(r.adapter).number;
            self.note((
                h,
                Event {
                    reason: Reason::Lost,
                    node_id,
                    adapter,
                },
            ));
        }
    }

    /// `WaitSegmentEvent`: the next event of the local segment or connection `handle`.
    pub(crate) fn wait_segment_event(
        &mut self,
        conn: u64,
        host: HostId,
        handle: Handle,
        timeout_ms: Option<u32>,
    ) -> Result<Answer, RequestError> {
        let source = self.resolve(conn, handle, Scope::Descriptor, "handle", |o| {
            Some(matches!(o, Object::Segment(_) | Object::Remote(_)))
        })?;
        if !source {
            return Err(Refused::NoEventSource { handle }.into());
        }
        let events = Rc::clone(&self.segment_events);
        let cpu = self.cluster.machine.cpu(host);
        let limit = timeout_ms.map(|ms| SimDuration::from_us(u64::from(ms).saturating_mul(1_000)));
        let start = cpu.now();
        self.answer_later(conn, Some(handle), async move {
            loop {
                if let Some(e) = events.borrow_mut().pop(handle) {
                    return Ok(Reply::SegmentEvent {
                        reason: e.reason.code(),
                        node_id: e.node_id,
                        adapter: e.adapter,
                    });
                }
                if let Some(limit) = limit.filter(|&l| cpu.now().since(start) >= l) {
                    return Err(SciError::Timeout(limit));
                }
                cpu.sleep(EVENT_LOOK).await;
            }
        });
        Ok(None)
    }
}
