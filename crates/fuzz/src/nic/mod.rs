//! The `nic_commands` target: two NICs on one Ethernet segment driven through their
//! programming interface by their hosts doing arbitrary things — BAR0 registers read and
//! written at any offset, width and value; rings set up right or wrong (misaligned, sizes
//! that are not powers of two in range, unmapped, running past the end of RAM); transmit
//! descriptors of every length (zero, shorter than a header, the largest frame, longer than
//! the MTU allows, any) whose buffers lie in RAM, nowhere or past it, and whose frames go to
//! the peer, to the sender itself, to everyone or to nobody; receive buffers posted or not,
//! too small, unmapped; doorbells valid, behind the head, too far ahead or on a disabled ring,
//! also while the NIC is still at work on the previous one (a `TAIL` lowered under it).
//!
//! ```text
//!   alpha (CPU, RAM: rings, buffers) ── nic0 ═══ segment "lan" ═══ nic1 ── beta (CPU, RAM)
//! ```
//!
//! The input's first byte picks the MTU (1500 or 9000); the rest decodes into at most
//! [`ops::MAX_OPS`] operations ([`ops::Op`]), after each of which the simulation drains and
//! is checked ([`host::Harness`]). Checked: nothing panics; each operation drains within 20 ms
//! of virtual time and the run comes to rest; a register access completes with the exact
//! `CompleterError` the access rules predict, and a ring set-up or doorbell leaves in the
//! queue's `ERROR` the `RingError` they predict (or leaves it as it was); `HEAD` never passes
//! `TAIL`, which never runs more than `SIZE` ahead; every transmit descriptor consumed is
//! written back with a known `Status`, the one its length and buffer predict; `TX_FRAMES` and
//! `WIRE_TX_FRAMES` count exactly the frames sent; the peer takes off the wire exactly the
//! frames put on it; frames for nobody are counted as filtered; the receive descriptors
//! consumed hold, in order, the frames sent to that NIC, byte-identical (or the status saying
//! why not: too small, DMA failed); `RX_NO_BUFFER` counts exactly the frames that found no
//! posted buffer and `RX_FRAMES` those written back Ok; and host RAM around the harness's
//! area is never written. Receive matching is skipped for a drain in which a receive ring was
//! set up again or disabled by a DMA failure, or a frame's bytes were not known.

pub mod check;
pub mod host;
pub mod ops;

use crate::Outcome;
use host::{Harness, Side};
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_devices::nic::spec::Status;
use smartio_fabric::Fabric;
use smartio_platform::pci::{self, command};
use smartio_platform::SimTime;
use std::cell::Cell;
use std::rc::Rc;

/// Virtual time a run may take (each operation drains within 20 ms).
const DEADLINE: SimTime = SimTime(2_000_000_000_000); // 2 s

/// The MTUs an input may pick (its first byte, even: 1500, odd: 9000).
const MTUS: [usize; 2] = [1500, 9000];

fn scenario(mtu: usize) -> String {
    let host = |name: &str| {
        format!(
            "\n[[host]]\nname = \"{name}\"\nram = \"4 GiB\"\niommu = false\ncores = 2\n\n\
             [[host.device]]\nname = \"nic0\"\nkind = \"nic\"\nparent = \"root\"\n\
             link = \"gen3 x16\"\nparams = {{ network = \"lan\", mtu = {mtu} }}\n"
        )
    };
    format!(
        "name = \"nic-fuzz\"\ndescription = \"two hosts joined by Ethernet only\"\n{}{}",
        host("alpha"),
        host("beta")
    )
}

/// The two-host scenario with MTU `MTUS[m]`, enumerated once per thread.
fn setup(m: usize) -> (Fabric, Calibration) {
    let mtu = MTUS[m % 2];
    let fabric = crate::cached_scenario(&format!("nic-fuzz-{mtu}.toml"), || scenario(mtu));
    (fabric, crate::calibration_default())
}

/// The MTU input `data` picks (its first byte: even 1500, odd 9000).
pub fn mtu(data: &[u8]) -> usize {
    MTUS[usize::from(data.first().copied().unwrap_or(0) % 2)]
}

/// Drives both NICs with the operations `data` decodes to and checks the outcome.
pub fn nic_commands(data: &[u8]) -> Outcome {
    let m = usize::from(data.first().copied().unwrap_or(0) % 2);
    let ops = ops::decode(data.get(1..).unwrap_or(&[]));
    let count = ops.len();
    let (fabric, calibration) = setup(m);
    let cluster = match Cluster::from_fabric(fabric, &calibration, &ClusterOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("the NIC scenario does not build: {e}"),
    };
    let _guard = crate::MachineGuard(cluster.machine.clone());
    let machine = cluster.machine.clone();
    let f = machine.fabric();
    let sides: Vec<Side> = cluster
        .nics()
        .filter_map(|(endpoint, nic)| {
            let function = nic.function(0)?;
            let host = f.endpoint(endpoint).host;
            let h = f.host(host);
            let start = h.ram.first().map_or(0, |r| r.start);
            let ram_end = h.ram.last().map_or(0, |r| r.end);
            Some(Side {
                endpoint,
                host,
                nic,
                function,
                area: start + (256 << 20),
                ram_end,
            })
        })
        .collect();
    drop(f);
    let sides: [Side; 2] = <[Side; 2]>::try_from(sides)
        .unwrap_or_else(|s| panic!("the NIC scenario has {} NICs, not 2", s.len()));
    assert_ne!(sides[0].host, sides[1].host, "the NICs share a host");
    let harness = Rc::new(Harness::new(&machine, sides, MTUS[m]));
    harness.fill_guards();

    let done = Rc::new(Cell::new(false));
    let (h, flag) = (harness.clone(), done.clone());
    let cpus: Vec<_> = harness
        .sides()
        .iter()
        .map(|s| (machine.cpu(s.host), s.endpoint))
        .collect();
    machine.spawn(async move {
        let on = (command::MEMORY_SPACE | command::BUS_MASTER).to_le_bytes();
        for (cpu, ep) in cpus {
            if let Err(e) = cpu.config_write(ep, pci::COMMAND, &on).await {
                panic!("enabling a NIC failed: {e}");
            }
        }
        h.run(ops).await;
        flag.set(true);
    });
    let end = machine.run_until(DEADLINE);
    assert!(
        done.get(),
        "the hosts did not finish their {count} operations by {} ps of virtual time: {}",
        DEADLINE.as_ps(),
        machine.blocked_summary()
    );
    assert!(
        end.end.as_ps() < DEADLINE.as_ps() / 2,
        "the simulation did not come to rest: events until {} ps",
        end.end.as_ps()
    );
    harness.check_guards();
    let stats = harness.stats.borrow();
    let names = |counts: &[u32; 8]| -> String {
        Status::ALL
            .iter()
            .filter(|s| counts[s.code() as usize] > 0)
            .map(|s| format!("{s:?} x{}", counts[s.code() as usize]))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ring_errors: Vec<String> = smartio_devices::nic::spec::RingError::ALL
        .iter()
        .filter(|e| stats.ring_errors[e.code() as usize] > 0)
        .map(|e| format!("{e:?} x{}", stats.ring_errors[e.code() as usize]))
        .collect();
    Outcome::accepted(format!(
        "MTU {}, {count} ops, ended at {} ps; tx [{}]; rx [{}]; ring errors [{}]; {} register \
         accesses ({} refused); {} drains unmatched",
        MTUS[m],
        end.end.as_ps(),
        names(&stats.tx),
        names(&stats.rx),
        ring_errors.join(", "),
        stats.registers.0,
        stats.registers.1,
        stats.unmatched
    ))
}
