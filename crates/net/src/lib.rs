//! Network workloads over the hosts' network stacks: [`iperf`](mod@iperf), an iperf2-like throughput
//! test (Paper V §7.1.6, Figs. 28 and 29) over any frame link — a NIC driver bound to a
//! physical or virtual function, local or borrowed, or the test wire.
//!
//! Built on `smartio-workloads` (booting the cluster, progress); the `smartio iperf` command
//! and the `repro` figures run it.
//!
//! # Inside this crate
//!
//! [`iperf`](mod@iperf) is iperf2's client/server test over any `FrameLink` (`run_iperf`: clients with
//! parallel streams write for a duration of virtual time, the server reads and checks every byte
//! against its stream's pattern, both ends' counts sampled every interval) and on a cluster
//! (`iperf`: each end binds a NIC function — a host's own or a lender's borrowed by Device
//! Lending, PF or VF — with the NIC driver, puts a `net::NetStack` on it and runs the core; two
//! ends on one function are refused).

#![forbid(unsafe_code)]

pub mod iperf;

pub use iperf::{
    iperf, run_iperf, IperfConfig, IperfEnd, IperfError, IperfInterval, IperfReport, IperfResult,
    IperfStream, IperfTiming, DEFAULT_WRITE_BYTES, IPERF_PORT,
};
