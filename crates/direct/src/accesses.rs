//! The direct engine's accesses through the platform contract: each is done when it starts
//! (it lands, or its data is read, at once) and handed out after its task has yielded once,
//! so that a task polling a register in a loop lets the others run. Between the two, the
//! outcome and a read's data wait in a slot whose buffer is reused, so an access allocates
//! nothing; the contract's tickets name the slots.

use smartio_machine::Ticket;
use smartio_platform::AccessError;
use std::task::{Context, Poll};

/// A read's buffer is kept for the slot's next access up to this capacity (a larger one is
/// freed, so that one big read does not hold memory for the run).
const KEPT_BYTES: usize = 64 * 1024;

#[derive(Debug)]
struct Slot {
    gen: u32,
    live: bool,
    yielded: bool,
    outcome: Result<(), AccessError>,
    data: Vec<u8>,
}

/// Every access whose outcome has not been handed out. A ticket is a slot's index and
/// generation: a slot given back and reused does not answer to an old ticket.
#[derive(Debug, Default)]
pub(crate) struct Accesses {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// What a ticket names that no slot holds: a bug of the port that polled it.
fn stale(ticket: Ticket) -> ! {
    panic!("emulator bug: the direct engine has no access under way for {ticket:?}")
}

impl Accesses {
    /// Carries out an access now: `run` gets the slot's buffer (emptied) for a read's data
    /// and returns the outcome.
    pub fn start(&mut self, run: impl FnOnce(&mut Vec<u8>) -> Result<(), AccessError>) -> Ticket {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(Slot {
                    gen: 0,
                    live: false,
                    yielded: false,
                    outcome: Ok(()),
                    data: Vec::new(),
                });
                // 2^32 accesses under way at once would need far more memory than exists.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let slot = &mut self.slots[id as usize];
        slot.data.clear();
        slot.outcome = run(&mut slot.data);
        slot.live = true;
        slot.yielded = false;
        Ticket(u64::from(slot.gen) << 32 | u64::from(id))
    }

    fn slot(&mut self, ticket: Ticket) -> &mut Slot {
        let (gen, id) = ((ticket.0 >> 32) as u32, ticket.0 as u32);
        match self.slots.get_mut(id as usize) {
            Some(slot) if slot.live && slot.gen == gen => slot,
            _ => stale(ticket),
        }
    }

    /// Pending once (the task is woken at once), then the outcome, a read's data copied
    /// into `buf`; the slot is then given back.
    pub fn poll(
        &mut self,
        ticket: Ticket,
        buf: &mut [u8],
        cx: &Context<'_>,
    ) -> Poll<Result<(), AccessError>> {
        let slot = self.slot(ticket);
        if !slot.yielded {
            slot.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let outcome = std::mem::replace(&mut slot.outcome, Ok(()));
        if outcome.is_ok() {
            let n = slot.data.len().min(buf.len());
            buf[..n].copy_from_slice(&slot.data[..n]);
        }
        self.release(ticket);
        Poll::Ready(outcome)
    }

    /// Gives back an access whose future was dropped before its outcome was handed out.
    pub fn release(&mut self, ticket: Ticket) {
        let id = ticket.0 as u32;
        let slot = self.slot(ticket);
        slot.live = false;
        slot.gen = slot.gen.wrapping_add(1);
        slot.outcome = Ok(());
        if slot.data.capacity() > KEPT_BYTES {
            slot.data = Vec::new();
        }
        self.free.push(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn an_access_is_handed_out_after_one_yield_and_its_slot_is_reused() {
        let mut a = Accesses::default();
        let cx = Context::from_waker(Waker::noop());
        let t = a.start(|data| {
            data.extend_from_slice(&[1, 2, 3, 4]);
            Ok(())
        });
        let mut buf = [0u8; 4];
        assert!(a.poll(t, &mut buf, &cx).is_pending());
        assert_eq!(a.poll(t, &mut buf, &cx), Poll::Ready(Ok(())));
        assert_eq!(buf, [1, 2, 3, 4]);
        let again = a.start(|_| Ok(()));
        assert_eq!(again.0 as u32, t.0 as u32, "the slot is reused");
        assert_ne!(again, t, "under a new generation");
        a.release(again);
        assert_eq!(a.free.len(), 1);
    }
}
