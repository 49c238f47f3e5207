//! Which acknowledged writes an NVMe Flush has made durable, so that serving can end with
//! a Flush of the rest ([`super::NbdExport::make_durable`]) and say how many were at risk
//! if it fails.
//!
//! NBD (`doc/proto.md`, "Ordering of messages and writes"): every write answered before a
//! `NBD_CMD_FLUSH` is processed must be on non-volatile storage before the flush's reply,
//! and a request with `NBD_CMD_FLAG_FUA` must be before its own reply. Writes are numbered
//! as they are acknowledged; a Flush covers those numbered before it started (a write
//! acknowledged while it runs may have reached the store after the sync), and once it
//! succeeds they are durable. FUA requests are durable on their own and are not numbered.

use std::cell::Cell;

/// Acknowledged writes, and how many of the first of them a successful Flush covered.
#[derive(Debug, Default)]
pub(super) struct Durability {
    /// Writes, write-zeroes and trims acknowledged without FUA.
    acknowledged: Cell<u64>,
    /// How many of the first acknowledged writes a successful Flush covered.
    durable: Cell<u64>,
}

impl Durability {
    /// A write was acknowledged.
    pub(super) fn acknowledged(&self) {
        self.acknowledged.set(self.acknowledged.get() + 1);
    }

    /// The acknowledged writes a Flush starting now covers.
    pub(super) fn covering(&self) -> u64 {
        self.acknowledged.get()
    }

    /// A Flush that covered the first `covered` acknowledged writes succeeded.
    pub(super) fn flushed(&self, covered: u64) {
        self.durable.set(self.durable.get().max(covered));
    }

    /// Acknowledged writes no successful Flush covered.
    pub(super) fn unflushed(&self) -> u64 {
        self.acknowledged.get() - self.durable.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_covers_the_writes_acknowledged_before_it_started_not_those_during_it() {
        let d = Durability::default();
        d.acknowledged();
        d.acknowledged();
        let first = d.covering();
        d.acknowledged(); // while the flush runs
        d.flushed(first);
        assert_eq!(d.unflushed(), 1);
        // An older flush finishing late covers no less than a newer one did.
        let second = d.covering();
        d.flushed(second);
        d.flushed(first);
        assert_eq!(d.unflushed(), 0);
        // A flush that failed covers nothing: `flushed` is never called for it.
        d.acknowledged();
        let _failed = d.covering();
        assert_eq!(d.unflushed(), 1);
    }
}
