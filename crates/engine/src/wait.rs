//! Why a task is not ready: what the engine's own futures and the platform's notes say a
//! task waits for, kept per task so that a run that ends with tasks still waiting can say
//! on what — instead of "a task is stuck".

use smartio_fabric::{Fabric, HostId, Requester};
use smartio_platform::{BusAddr, PhysAddr, SimTime};
use std::fmt::Write as _;

/// One thing a task waits for. Cheap to record (no formatting until a report is made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// A timer (a software cost, a sleep, a timeout) due at this time.
    Timer {
        /// When it fires.
        due: SimTime,
    },
    /// A transaction it issued.
    Access {
        /// Who issued it.
        requester: Requester,
        /// Where.
        addr: BusAddr,
        /// Bytes.
        len: u64,
        /// A write (else a read).
        write: bool,
    },
    /// A write into a range of a host's memory (a memory watch: polling a completion word).
    MemoryWrite {
        /// Whose memory.
        host: HostId,
        /// Start of the range.
        addr: PhysAddr,
        /// Bytes watched.
        len: u64,
    },
    /// An interrupt vector of a host.
    Interrupt {
        /// The host.
        host: HostId,
        /// The vector.
        vector: u32,
    },
    /// The next link state change (a link going down or coming up).
    LinkEvent,
    /// Something outside the engine, as the waiting code described it
    /// ([`smartio_platform::waiting::note`]).
    Note(&'static str),
}

impl Wait {
    /// Describes the wait with the fabric's names for hosts and requesters.
    pub fn describe(&self, fabric: &Fabric) -> String {
        let host = |h: HostId| {
            fabric
                .hosts()
                .get(h.index())
                .map_or_else(|| format!("host #{}", h.0), |x| x.name.clone())
        };
        let requester = |r: Requester| match r {
            Requester::Cpu(h) => format!("the CPU of {}", host(h)),
            Requester::Device(e) => {
                let ep = fabric.endpoint(e);
                format!("device {} of {}", ep.name, host(ep.host))
            }
        };
        match *self {
            Wait::Timer { due } => format!("a timer due at {due}"),
            Wait::Access {
                requester: r,
                addr,
                len,
                write,
            } => format!(
                "its {} of {len} bytes at {addr} by {}",
                if write { "write" } else { "read" },
                requester(r)
            ),
            Wait::MemoryWrite { host: h, addr, len } => {
                format!("a write into {} memory {addr}..+{len}", host(h))
            }
            Wait::Interrupt { host: h, vector } => {
                format!("interrupt vector {vector} of {}", host(h))
            }
            Wait::LinkEvent => "the next link state change".to_string(),
            Wait::Note(what) => what.to_string(),
        }
    }
}

/// A task that had not finished when a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedTask {
    /// Where it was spawned (`file:line`).
    pub spawned_at: String,
    /// What it waits for (any of these would wake it).
    pub waits: Vec<String>,
}

/// One line per group of tasks spawned at the same place and waiting for the same kind of
/// thing, most numerous first; `limit` lines at most.
pub fn summarize(blocked: &[BlockedTask], limit: usize) -> String {
    let mut groups: Vec<(String, usize, &BlockedTask)> = Vec::new();
    for t in blocked {
        let key = format!("{} {}", t.spawned_at, t.waits.join(" | "));
        match groups.iter_mut().find(|(k, _, _)| *k == key) {
            Some(g) => g.1 += 1,
            None => groups.push((key, 1, t)),
        }
    }
    groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out = String::new();
    for (i, (_, n, t)) in groups.iter().enumerate() {
        if i == limit {
            let _ = write!(out, "; and {} more groups", groups.len() - limit);
            break;
        }
        if i > 0 {
            out.push_str("; ");
        }
        let what = if t.waits.is_empty() {
            "something the engine cannot name (no wait was recorded)".to_string()
        } else {
            t.waits.join(" or ")
        };
        let (tasks, wait) = if *n == 1 {
            ("task", "waits")
        } else {
            ("tasks", "wait")
        };
        let _ = write!(
            out,
            "{n} {tasks} spawned at {} {wait} for {what}",
            t.spawned_at
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(at: &str, waits: &[&str]) -> BlockedTask {
        BlockedTask {
            spawned_at: at.to_string(),
            waits: waits.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn blocked_tasks_are_grouped_by_place_and_wait_most_numerous_first() {
        let blocked = [
            task("a.rs:1", &["a timer"]),
            task("b.rs:2", &["a doorbell"]),
            task("b.rs:2", &["a doorbell"]),
            task("c.rs:3", &[]),
        ];
        let s = summarize(&blocked, 2);
        assert_eq!(
            s,
            "2 tasks spawned at b.rs:2 wait for a doorbell; \
             1 task spawned at a.rs:1 waits for a timer; and 1 more groups"
        );
        assert!(summarize(&blocked[3..], 5).contains("cannot name"));
    }
}
