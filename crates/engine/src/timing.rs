//! The timing model: what one TLP costs on each link and chip of its path.
//!
//! For each hop the TLP waits for the link direction to be free (FIFO occupancy, which is
//! where contention comes from), occupies it for its serialization time, and its head reaches
//! the next chip after the link's propagation delay plus the chip's cut-through latency:
//!
//! ```text
//! start     = max(head, link.busy_until[dir])
//! busy_until = start + wire_bytes * time_per_byte
//! head'     = start + propagation + chip_latency (+ any rate mismatch to the next link)
//! arrival   = start_last + serialization_last + propagation_last
//! ```
//!
//! `time_per_byte` comes from the generation's signalling rate, encoding, width and a DLLP
//! overhead fraction; wire bytes are payload plus per-TLP overhead (framing, header, CRC).

use crate::calibration::Calibration;
use smartio_fabric::{Fabric, Hop, LinkKind, NodeKind};
use smartio_platform::{SimDuration, SimTime};
use thiserror::Error;

/// A scenario names something the calibration does not cover.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TimingError {
    /// A chip model without an entry in `[chips]`.
    #[error("{node}: chip model {chip:?} has no [chips.{chip}] entry in the calibration (known: {known})")]
    UnknownChip {
        /// The node using it.
        node: String,
        /// The chip model.
        chip: String,
        /// Calibrated chip models.
        known: String,
    },
}

/// Transaction-layer sizes in force (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlpSizes {
    /// Maximum payload size of a write or completion TLP.
    pub mps: u64,
    /// Maximum read request size.
    pub mrrs: u64,
    /// Read completion boundary.
    pub rcb: u64,
    /// Largest completion a completer returns.
    pub completion_max: u64,
    /// Size a root complex cuts a read request into when it forwards it to another port
    /// (0: unchanged).
    pub forwarded_read_request: u64,
}

/// Cost parameters of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkTiming {
    /// Femtoseconds per wire byte, DLLP overhead included.
    pub fs_per_byte: u64,
    /// Per-TLP overhead bytes on this link.
    pub overhead: u32,
    /// Propagation delay.
    pub prop_ps: u64,
}

impl LinkTiming {
    /// Serialization time of a TLP with `payload` bytes.
    pub fn serialization_ps(&self, payload: u64) -> u64 {
        ((payload + self.overhead as u64) * self.fs_per_byte + 500) / 1000
    }

    /// Effective payload bandwidth in bytes per second for TLPs of `payload` bytes.
    pub fn payload_bandwidth(&self, payload: u64) -> f64 {
        payload as f64 / (self.serialization_ps(payload) as f64 * 1e-12)
    }
}

/// All resolved timing of a fabric.
#[derive(Debug, Clone)]
pub struct Timing {
    /// Per link.
    pub links: Vec<LinkTiming>,
    /// Per node: latency a TLP spends crossing it (chips, root complex as a forwarder).
    pub node_latency_ps: Vec<u64>,
    /// TLP sizes.
    pub sizes: TlpSizes,
    /// Root complex latency.
    pub root_complex_ps: u64,
    /// DRAM read latency behind the root complex.
    pub memory_read_ps: u64,
    /// Per endpoint: register/memory read latency inside the device.
    pub endpoint_read_ps: Vec<u64>,
    /// Per endpoint: non-posted requests it may keep open.
    pub endpoint_tags: Vec<u32>,
    /// Non-posted requests a host's CPUs may keep open.
    pub cpu_tags: Vec<u32>,
    /// CPU costs.
    pub cpu: CpuTiming,
    /// Posted TLPs one write stream may have on their way (flow-control backpressure).
    pub posted_credits: usize,
}

/// CPU and software costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTiming {
    /// A load from local DRAM.
    pub memory_read: SimDuration,
    /// A store to local DRAM.
    pub memory_write: SimDuration,
    /// An uncached store or load leaving the core.
    pub mmio_issue: SimDuration,
    /// Interval of a polling loop.
    pub poll_interval: SimDuration,
    /// MSI arrival to handler.
    pub interrupt_delivery: SimDuration,
    /// System call entry and exit.
    pub syscall: SimDuration,
    /// Largest TLP a CPU store stream produces (write-combining buffer size).
    pub max_store_bytes: u64,
    /// A configuration read or write.
    pub config_access: SimDuration,
    /// Block layer + driver submission path per request.
    pub block_submit: SimDuration,
    /// Block layer + driver completion path per request.
    pub block_complete: SimDuration,
}

fn ns(p: &crate::calibration::Param) -> u64 {
    SimDuration::from_ns_f64(p.value).as_ps()
}

impl Timing {
    /// Resolves every link and chip of `fabric` against `cal`.
    pub fn resolve(fabric: &Fabric, cal: &Calibration) -> Result<Timing, TimingError> {
        let links = fabric
            .links()
            .iter()
            .map(|l| {
                let (gt, enc) = cal.lane_rate(l.spec.gen);
                let bytes_per_s = gt * 1e9 * enc * l.spec.width as f64 / 8.0;
                let fs = 1e15 / bytes_per_s * (1.0 + cal.pcie.dllp_overhead_fraction.value);
                LinkTiming {
                    fs_per_byte: fs.round() as u64,
                    overhead: cal.tlp_overhead(l.spec.gen),
                    prop_ps: match l.kind {
                        LinkKind::Tree => ns(&cal.pcie.link_propagation_ns),
                        LinkKind::Cable => ns(&cal.pcie.cable_propagation_ns),
                    },
                }
            })
            .collect();
        let root_complex_ps = ns(&cal.root_complex.latency_ns);
        let mut node_latency_ps = Vec::with_capacity(fabric.nodes().len());
        for (i, n) in fabric.nodes().iter().enumerate() {
            let lat = match &n.kind {
                NodeKind::RootComplex => root_complex_ps,
                NodeKind::Device { .. } => 0,
                _ => {
                    let chip = fabric
                        .chip_of(smartio_fabric::NodeId(i as u32))
                        .unwrap_or_default();
                    let params = cal
                        .chips
                        .get(chip)
                        .ok_or_else(|| TimingError::UnknownChip {
                            node: n.name.clone(),
                            chip: chip.to_string(),
                            known: cal.chips.keys().cloned().collect::<Vec<_>>().join(", "),
                        })?;
                    ns(&params.latency_ns)
                }
            };
            node_latency_ps.push(lat);
        }
        let endpoint_read_ps = fabric
            .endpoints()
            .iter()
            .map(|e| ns(&cal.device(&e.kind).mmio_read_ns))
            .collect();
        let endpoint_tags = fabric
            .endpoints()
            .iter()
            .map(|e| cal.device(&e.kind).max_outstanding_reads.value.max(1.0) as u32)
            .collect();
        let cpu_tags = fabric
            .hosts()
            .iter()
            .map(|h| (cal.cpu.max_outstanding_reads.value.max(1.0) as u32) * h.cores)
            .collect();
        let d = |p: &crate::calibration::Param| SimDuration::from_ns_f64(p.value);
        Ok(Timing {
            links,
            node_latency_ps,
            sizes: TlpSizes {
                mps: cal.pcie.max_payload_size.value as u64,
                mrrs: cal.pcie.max_read_request_size.value as u64,
                rcb: cal.pcie.read_completion_boundary.value as u64,
                completion_max: cal.pcie.completion_max_payload.value as u64,
                forwarded_read_request: cal.root_complex.forwarded_read_request_bytes.value as u64,
            },
            root_complex_ps,
            memory_read_ps: ns(&cal.root_complex.memory_read_ns),
            endpoint_read_ps,
            endpoint_tags,
            cpu_tags,
            posted_credits: cal.pcie.posted_credits_tlps.value.max(1.0) as usize,
            cpu: CpuTiming {
                memory_read: d(&cal.cpu.memory_read_ns),
                memory_write: d(&cal.cpu.memory_write_ns),
                mmio_issue: d(&cal.cpu.mmio_issue_ns),
                poll_interval: d(&cal.cpu.poll_interval_ns),
                interrupt_delivery: d(&cal.cpu.interrupt_delivery_ns),
                syscall: d(&cal.cpu.syscall_ns),
                max_store_bytes: cal.cpu.max_store_bytes.value.max(4.0) as u64,
                config_access: d(&cal.cpu.config_access_ns),
                block_submit: d(&cal.cpu.block_submit_ns),
                block_complete: d(&cal.cpu.block_complete_ns),
            },
        })
    }

    /// The costed form of a fabric path.
    pub fn costed(&self, hops: &[Hop]) -> Vec<HopCost> {
        hops.iter()
            .enumerate()
            .map(|(i, h)| HopCost {
                link: h.link.0,
                dir: h.dir as u8,
                timing: self.links[h.link.index()],
                // The last node is the target; its cost is the transaction's business.
                node_latency_ps: if i + 1 == hops.len() {
                    0
                } else {
                    self.node_latency_ps[h.node.index()]
                },
            })
            .collect()
    }
}

/// One hop of a costed path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopCost {
    /// Link index.
    pub link: u32,
    /// Direction index (0 down, 1 up).
    pub dir: u8,
    /// The link's timing.
    pub timing: LinkTiming,
    /// Latency of the node reached (0 for the final node).
    pub node_latency_ps: u64,
}

/// Per-link, per-direction occupancy and statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkState {
    /// When each direction is next free.
    pub busy_until: [u64; 2],
    /// TLPs sent per direction.
    pub tlps: [u64; 2],
    /// Wire bytes per direction.
    pub wire_bytes: [u64; 2],
    /// Payload bytes per direction.
    pub payload_bytes: [u64; 2],
    /// Time busy per direction (ps).
    pub busy_ps: [u64; 2],
}

/// Sends one TLP of `payload` bytes along `path` starting at `start`; returns the time its
/// last byte is received at the final node.
pub fn traverse(
    links: &mut [LinkState],
    path: &[HopCost],
    start: SimTime,
    payload: u64,
) -> SimTime {
    match path.first() {
        Some(h) => SimTime(run_hops(
            links,
            path,
            0,
            start.as_ps(),
            h.timing.serialization_ps(payload),
            payload,
            None,
        )),
        None => start,
    }
}

/// Sends one TLP along several paths that share prefixes (a multicast write replicated by
/// the switches): a shared link carries the TLP once, and each path continues from the time
/// the head reached the point where it branches off. Returns each path's arrival time.
pub fn traverse_tree(
    links: &mut [LinkState],
    paths: &[&[HopCost]],
    start: SimTime,
    payload: u64,
) -> Vec<SimTime> {
    let mut begins: Vec<Vec<u64>> = Vec::with_capacity(paths.len());
    let mut out: Vec<SimTime> = Vec::with_capacity(paths.len());
    for (i, path) in paths.iter().enumerate() {
        let mut shared = (0, 0);
        for (j, earlier) in paths[..i].iter().enumerate() {
            let k = path
                .iter()
                .zip(earlier.iter())
                .take_while(|(a, b)| a.link == b.link && a.dir == b.dir)
                .count();
            if k > shared.0 {
                shared = (k, j);
            }
        }
        let (k, j) = shared;
        if path.is_empty() || k == path.len() {
            // Nothing new to cross: it arrives with the earlier copy.
            out.push(if path.is_empty() { start } else { out[j] });
            begins.push(if path.is_empty() {
                Vec::new()
            } else {
                begins[j].clone()
            });
            continue;
        }
        let mut b = Vec::with_capacity(path.len());
        let ser = path[k].timing.serialization_ps(payload);
        let head = if k == 0 {
            start.as_ps()
        } else {
            b.extend_from_slice(&begins[j][..k]);
            let prev = &path[k - 1];
            let prev_ser = prev.timing.serialization_ps(payload);
            begins[j][k - 1]
                + prev.timing.prop_ps
                + prev.node_latency_ps
                + prev_ser.saturating_sub(ser)
        };
        let end = run_hops(links, path, k, head, ser, payload, Some(&mut b));
        out.push(SimTime(end));
        begins.push(b);
    }
    out
}

/// Crosses `path[from..]` with the head at `head` and serialization `ser` on the first of
/// those links; records each hop's start time in `begins` if given.
fn run_hops(
    links: &mut [LinkState],
    path: &[HopCost],
    from: usize,
    mut head: u64,
    mut ser: u64,
    payload: u64,
    mut begins: Option<&mut Vec<u64>>,
) -> u64 {
    for i in from..path.len() {
        let hop = &path[i];
        let state = &mut links[hop.link as usize];
        let d = hop.dir as usize;
        let begin = head.max(state.busy_until[d]);
        if let Some(b) = begins.as_deref_mut() {
            b.push(begin);
        }
        state.busy_until[d] = begin + ser;
        state.tlps[d] += 1;
        state.wire_bytes[d] += payload + hop.timing.overhead as u64;
        state.payload_bytes[d] += payload;
        state.busy_ps[d] += ser;
        match path.get(i + 1) {
            None => return begin + ser + hop.timing.prop_ps,
            Some(next) => {
                let next_ser = next.timing.serialization_ps(payload);
                head =
                    begin + hop.timing.prop_ps + hop.node_latency_ps + ser.saturating_sub(next_ser);
                ser = next_ser;
            }
        }
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(fs_per_byte: u64) -> LinkTiming {
        LinkTiming {
            fs_per_byte,
            overhead: 26,
            prop_ps: 2_000,
        }
    }

    #[test]
    fn a_single_tlp_pays_serialization_once_plus_each_hops_latency() {
        let path = [
            HopCost {
                link: 0,
                dir: 1,
                timing: link(1000),
                node_latency_ps: 150_000,
            },
            HopCost {
                link: 1,
                dir: 1,
                timing: link(1000),
                node_latency_ps: 0,
            },
        ];
        let mut links = vec![LinkState::default(); 2];
        let end = traverse(&mut links, &path, SimTime(0), 64);
        // 90 wire bytes at 1 ps each; cut-through: 2 ns + 150 ns, then 90 ps + 2 ns.
        assert_eq!(end, SimTime(2_000 + 150_000 + 90 + 2_000));
        assert_eq!(links[1].busy_until[1], 154_090 - 2_000);
        assert_eq!(links[0].tlps, [0, 1]);
    }

    #[test]
    fn back_to_back_tlps_queue_behind_each_other() {
        let path = [HopCost {
            link: 0,
            dir: 0,
            timing: link(1000),
            node_latency_ps: 0,
        }];
        let mut links = vec![LinkState::default(); 1];
        let a = traverse(&mut links, &path, SimTime(0), 100);
        let b = traverse(&mut links, &path, SimTime(0), 100);
        assert_eq!(b.as_ps() - a.as_ps(), 126);
    }

    #[test]
    fn a_slow_link_before_a_fast_one_delays_the_head_by_the_difference() {
        let path = [
            HopCost {
                link: 0,
                dir: 0,
                timing: link(4000),
                node_latency_ps: 0,
            },
            HopCost {
                link: 1,
                dir: 0,
                timing: link(1000),
                node_latency_ps: 0,
            },
        ];
        let mut links = vec![LinkState::default(); 2];
        let end = traverse(&mut links, &path, SimTime(0), 74);
        // 100 wire bytes: 400 ps on the slow link, 100 on the fast one; the tail decides.
        assert_eq!(end, SimTime(2_000 + 300 + 100 + 2_000));
    }
}
