//! Remote-store (PIO) throughput: host A's CPU stores a block into host B's segment through
//! its NTB map, then a flag word after it; B polls the flag. PCIe ordering makes the flag land
//! last, so the time from A's first store to B seeing the flag covers the whole block.
//! Stores leave the core as write-combined TLPs (`cpu.max_store_bytes`).

use crate::counts::BadCount;
use crate::shm::{find_host, pair, ShmError};
use crate::stats::median;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_platform::{Clock, SimTime};
use smartio_smartio::sisci::Sisci;
use std::cell::RefCell;
use std::rc::Rc;

/// What to measure.
#[derive(Debug, Clone)]
pub struct PioBenchConfig {
    /// The storing host.
    pub from: String,
    /// The host owning the segment.
    pub to: String,
    /// Block sizes in bytes.
    pub sizes: Vec<u64>,
    /// Blocks per size.
    pub repeat: u32,
}

/// Throughput for one block size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PioSample {
    /// Block size.
    pub size_bytes: u64,
    /// Median throughput over the repeats.
    pub median_bytes_per_s: f64,
    /// Median time from the first store to the flag seen by the owner, in nanoseconds.
    pub median_ns: f64,
}

/// Runs the remote-store benchmark on `cluster`.
pub fn bench_pio(cluster: &Cluster, config: &PioBenchConfig) -> Result<Vec<PioSample>, ShmError> {
    let a = find_host(cluster, &config.from)?;
    let b = find_host(cluster, &config.to)?;
    if a == b {
        return Err(ShmError::SameHost {
            host: config.from.clone(),
            workload: "a remote-store benchmark",
        });
    }
    check_counts(config)?;
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    let sci = Sisci::new(&cluster.machine);
    let segment = largest.checked_add(4096).ok_or(BadCount::TooLarge {
        what: "block",
        size: largest,
    })?;
    let (writer, owner) = pair(&sci, a, b, segment)?;
    let flag_at = largest.next_multiple_of(64);
    let sizes = config.sizes.clone();
    let repeat = config.repeat;
    let times = Rc::new(RefCell::new(Vec::new()));

    let out = times.clone();
    let cpu = cluster.machine.cpu(a);
    let plan = sizes.clone();
    let total = sizes.iter().fold(0u64, |t, s| {
        t.saturating_add(s.saturating_mul(u64::from(repeat)))
    });
    cluster.machine.spawn(async move {
        let mut phase =
            crate::progress::begin("remote stores", total, crate::progress::Unit::Bytes);
        let mut stored = 0u64;
        let mut round = 0u64;
        for size in plan {
            let block = vec![0x5a_u8; size as usize];
            for _ in 0..repeat {
                round += 1;
                stored = stored.saturating_add(size);
                phase.set(stored);
                let t0 = cpu.now();
                let _ = writer.remote.store(0, &block).await;
                let _ = writer.remote.store(flag_at, &round.to_le_bytes()).await;
                // Wait for the owner's acknowledgement before the next block.
                let _ = writer
                    .local
                    .poll_until(0, 8, |v| v == round.to_le_bytes())
                    .await;
                out.borrow_mut().push((size, t0));
            }
        }
    });
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = seen.clone();
    let owner_cpu = cluster.machine.cpu(b);
    let rounds = sizes.len() as u64 * repeat as u64;
    cluster.machine.spawn(async move {
        for round in 1..=rounds {
            let _ = owner
                .local
                .poll_until(flag_at, 8, |v| v == round.to_le_bytes())
                .await;
            s.borrow_mut().push(owner_cpu.now());
            let _ = owner.remote.store(0, &round.to_le_bytes()).await;
        }
    });
    cluster.machine.run();
    let (times, seen) = (times.borrow(), seen.borrow());
    if times.len() as u64 != rounds || seen.len() as u64 != rounds {
        return Err(ShmError::DidNotFinish {
            done: times.len().min(seen.len()) as u64,
            expected: rounds,
            stuck: crate::booted::stuck(&cluster.machine),
        });
    }
    Ok(samples(&sizes, &times, &seen))
}

/// Checks the repeats and block sizes: at least one repeat, no empty block.
fn check_counts(config: &PioBenchConfig) -> Result<(), ShmError> {
    if config.repeat == 0 {
        return Err(BadCount::NoRepeat { per: "block" }.into());
    }
    if let Some(&size) = config.sizes.iter().find(|&&s| s == 0) {
        return Err(BadCount::ZeroSize {
            what: "block",
            size,
        }
        .into());
    }
    Ok(())
}

/// Each size's median over its rounds, from when the writer stored the block (`times`) to
/// when the owner saw its flag (`seen`).
fn samples(sizes: &[u64], times: &[(u64, SimTime)], seen: &[SimTime]) -> Vec<PioSample> {
    sizes
        .iter()
        .map(|&size| {
            let mut ns: Vec<f64> = times
                .iter()
                .zip(seen.iter())
                .filter(|((s, _), _)| *s == size)
                .map(|((_, t0), t1)| t1.since(*t0).as_ps() as f64 / 1000.0)
                .collect();
            let m = median(&mut ns);
            PioSample {
                size_bytes: size,
                median_bytes_per_s: if m > 0.0 {
                    size as f64 / (m * 1e-9)
                } else {
                    0.0
                },
                median_ns: m,
            }
        })
        .collect()
}
