//! The objects a descriptor made, by handle: recording them, resolving the handles a request
//! names — every request passes the one ownership check, [`Table::may_use`] — and ending
//! them.

use crate::answer::Answer;
use crate::daemon::{Daemon, Table};
use crate::objects::Object;
use crate::protocol::{Handle, Reply};
use smartio_smartio::SciError;

/// Whose objects a handle may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The descriptor the connection acts for: a call's first object.
    Descriptor,
    /// Any descriptor of the connection's program: an object a call takes besides its first
    /// (the segment mapped for a device may come from another descriptor of the program).
    Process,
}

impl Table {
    /// Whether connection `conn` may use an object the descriptor `owner` made, in `scope`.
    pub(crate) fn may_use(&self, conn: u64, owner: u64, scope: Scope) -> bool {
        let me = self.owner_of(conn);
        owner == me || (scope == Scope::Process && self.same_process(owner, me))
    }

    /// Takes the object `handle` out of the table if `conn`'s descriptor owns it and `kind`
    /// accepts it; its owner and the object.
    fn take(
        &mut self,
        conn: u64,
        handle: Handle,
        kind: impl Fn(&Object) -> bool,
    ) -> Option<(u64, Object)> {
        let (owner, object) = self.objects.get(&handle)?;
        if !self.may_use(conn, *owner, Scope::Descriptor) || !kind(object) {
            return None;
        }
        self.objects.remove(&handle)
    }
}

impl Daemon {
    /// Records `object` for the descriptor `conn` acts for; returns its handle.
    pub(crate) fn keep(&self, conn: u64, object: Object) -> Handle {
        let mut t = self.table.borrow_mut();
        let owner = t.owner_of(conn);
        t.next += 1;
        let handle = t.next;
        t.objects.insert(handle, (owner, object));
        handle
    }

    /// Forgets the object `handle` (without releasing it); the object.
    pub(crate) fn forget(&self, handle: Handle) -> Option<Object> {
        self.table
            .borrow_mut()
            .objects
            .remove(&handle)
            .map(|(_, o)| o)
    }

    /// What `pick` takes of the object `handle` names, if connection `conn` may use it in
    /// `scope`. A handle the caller may not use is a stale `handle`; one `pick` does not
    /// take is a stale `what` (`segment handle`, ...).
    pub(crate) fn resolve<T>(
        &self,
        conn: u64,
        handle: Handle,
        scope: Scope,
        what: &'static str,
        pick: impl FnOnce(&Object) -> Option<T>,
    ) -> Result<T, SciError> {
        let t = self.table.borrow();
        let object = match t.objects.get(&handle) {
            Some((owner, object)) if t.may_use(conn, *owner, scope) => object,
            _ => {
                return Err(SciError::Stale {
                    what: "handle",
                    id: handle,
                })
            }
        };
        pick(object).ok_or(SciError::Stale { what, id: handle })
    }

    /// Handles of `conn`'s descriptor's objects that `wanted` picks.
    pub(crate) fn handles(&self, conn: u64, wanted: impl Fn(&Object) -> bool) -> Vec<Handle> {
        let t = self.table.borrow();
        t.objects
            .iter()
            .filter(|(_, (owner, object))| {
                t.may_use(conn, *owner, Scope::Descriptor) && wanted(object)
            })
            .map(|(h, _)| *h)
            .collect()
    }

    /// The first handle of `conn`'s descriptor's objects that `wanted` picks.
    pub(crate) fn find(&self, conn: u64, wanted: impl Fn(&Object) -> bool) -> Option<Handle> {
        self.handles(conn, wanted).into_iter().next()
    }

    /// Ends the object `handle` of the descriptor `conn` acts for, if `kind` accepts it
    /// (`what` names the kind for the error: `segment handle`, ...): released as a closing
    /// program's would be, and forgotten; if that is refused, it stays.
    pub(crate) fn end(
        &mut self,
        conn: u64,
        handle: Handle,
        what: &'static str,
        kind: impl Fn(&Object) -> bool,
    ) -> Result<Answer, SciError> {
        let taken = self.table.borrow_mut().take(conn, handle, kind);
        let (owner, object) = taken.ok_or(SciError::Stale { what, id: handle })?;
        let sisci = self.smartio.sisci().clone();
        match self.release(&sisci, &object) {
            Ok(()) => {
                self.segment_events.borrow_mut().forget(handle);
                Ok(Some((Reply::Done, None)))
            }
            Err(e) => {
                self.table
                    .borrow_mut()
                    .objects
                    .insert(handle, (owner, object));
                Err(e)
            }
        }
    }
}
