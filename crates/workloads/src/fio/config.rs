//! What a fio workload is asked to do ([`FioConfig`]), the bounds every value is checked
//! against before anything runs ([`FioConfig::check`]), and what a run measured
//! ([`FioResult`]).

use super::{BadParameter, FioError};
use smartio_drivers::nvme::CompletionMode;
use smartio_platform::SimDuration;
/// Most I/Os in flight per job: an NVMe queue of the emulated controller has 4096 entries
/// (CAP.MQES = 4095) and one of them always stays empty.
pub const MAX_IODEPTH: u32 = smartio_devices::nvme::controller::MAX_QUEUE_ENTRIES - 1;

/// Most jobs: NVMe numbers I/O queue pairs with 16 bits (65535 at most); a controller grants
/// fewer, and a run with more jobs than granted pairs is refused with the number granted.
pub const MAX_JOBS: u32 = u16::MAX as u32;

/// Most bytes of I/O buffers in flight (`jobs × iodepth × bs`): they are emulated host RAM
/// that the controller's DMA really writes, so they are memory of this process.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;

/// Most I/Os of one run (`--ops`): about three hours of wall time at the emulator's ~100 000
/// I/Os per second. Memory does not grow with it.
pub const MAX_OPS: u64 = 1_000_000_000;

/// Longest virtual run time (`--runtime`): an hour of virtual time takes an hour of wall
/// time or more (about ten at high queue depths). Memory does not grow with it.
pub const MAX_RUNTIME: SimDuration = SimDuration(3_600_000_000_000_000);

/// Largest range a verifying run may use (`--size` with `--verify`): the run first writes
/// every byte of it, and keeps a version per block.
pub const MAX_VERIFY_BYTES: u64 = 4 << 30;

/// The I/O pattern (fio's `--rw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RwMode {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    RandRead,
    /// Random writes.
    RandWrite,
    /// Random reads and writes (`rwmixread` percent reads).
    RandRw,
}

/// An `--rw` value that names no I/O pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown --rw {0:?} (read, write, randread, randwrite, randrw)")]
pub struct UnknownRwMode(pub String);

impl std::str::FromStr for RwMode {
    type Err = UnknownRwMode;
    fn from_str(s: &str) -> Result<Self, UnknownRwMode> {
        Ok(match s {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "randrw" => RwMode::RandRw,
            _ => return Err(UnknownRwMode(s.to_string())),
        })
    }
}

impl RwMode {
    pub(super) fn reads(self) -> bool {
        matches!(self, RwMode::Read | RwMode::RandRead | RwMode::RandRw)
    }
    pub(super) fn random(self) -> bool {
        matches!(self, RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw)
    }
}

/// When a job stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// After this many I/Os in total (over all jobs).
    Ops(u64),
    /// After this much virtual time.
    Runtime(SimDuration),
}

/// How the workload reaches the controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FioMethod {
    /// The native NVMe driver bound on the workload's host (borrowing the device by Device
    /// Lending if it is `lender:device`); each job is a CPU with its own queue pair.
    #[default]
    Native,
    /// A client of the distributed NVMe driver on the workload's host, its manager on
    /// `manager`. Each job is a queue pair of the client (`iodepth + 1` entries), data moves
    /// through the client's data segment, and completions are polled (the result's mode is
    /// `poll` whatever [`FioConfig::mode`] says).
    NvmeClient {
        /// Host running the manager.
        manager: String,
    },
    /// The distributed NVMe driver's kernel-space block client (seed 003) on the workload's
    /// host, its manager on `manager`: the workload's requests go through the host's block
    /// layer to a disk with one hardware queue (and queue pair) per job of `iodepth`
    /// requests, their data copied through the client's bounce buffer, completions polled
    /// (the result's mode is `poll`).
    NvmeBlock {
        /// Host running the manager.
        manager: String,
    },
}

impl FioMethod {
    /// The name `--method` takes.
    pub fn name(&self) -> &'static str {
        match self {
            FioMethod::Native => "native",
            FioMethod::NvmeClient { .. } => "nvme-client",
            FioMethod::NvmeBlock { .. } => "nvme-block",
        }
    }
}

/// A workload.
#[derive(Debug, Clone, PartialEq)]
pub struct FioConfig {
    /// Host to run on.
    pub host: String,
    /// Device in that host's tree.
    pub device: String,
    /// Pattern.
    pub rw: RwMode,
    /// Block size in bytes.
    pub bs: u64,
    /// I/Os in flight per job.
    pub iodepth: u32,
    /// When to stop.
    pub amount: Amount,
    /// Jobs (each on its own CPU and so its own queue pair).
    pub jobs: u32,
    /// Check every byte read.
    pub verify: bool,
    /// Seed of the random offsets.
    pub seed: u64,
    /// Bytes of the namespace the workload touches (from offset 0); `None` = the smaller of
    /// the namespace and 1 GiB.
    pub size: Option<u64>,
    /// Namespace id.
    pub nsid: u32,
    /// Percentage of reads in `randrw`.
    pub rwmixread: u32,
    /// Driver completion mode (native driver only).
    pub mode: CompletionMode,
    /// Native driver or distributed-driver client.
    pub method: FioMethod,
}

impl FioConfig {
    /// A QD1 4 KiB random-read workload of `ops` I/Os on `host`'s `device`.
    pub fn new(host: &str, device: &str) -> FioConfig {
        FioConfig {
            host: host.to_string(),
            device: device.to_string(),
            rw: RwMode::RandRead,
            bs: 4096,
            iodepth: 1,
            amount: Amount::Ops(10_000),
            jobs: 1,
            verify: false,
            seed: 1,
            size: None,
            nsid: 1,
            rwmixread: 50,
            mode: CompletionMode::Interrupt,
            method: FioMethod::Native,
        }
    }
}

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LatencyNs {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl LatencyNs {
    /// The figures of `r`'s samples (recorded in picoseconds); all 0 when empty.
    pub fn of(r: &crate::stats::LatencyRecorder) -> LatencyNs {
        let r = r.settled();
        let ns = |ps: u64| ps as f64 / 1000.0;
        LatencyNs {
            min: ns(r.min()),
            mean: r.mean() / 1000.0,
            p50: ns(r.percentile(50.0)),
            p90: ns(r.percentile(90.0)),
            p99: ns(r.percentile(99.0)),
            p999: ns(r.percentile(99.9)),
            max: ns(r.max()),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FioResult {
    /// Host.
    pub host: String,
    /// Device.
    pub device: String,
    /// Controller model (Identify).
    pub model: String,
    /// Completion mode.
    pub mode: String,
    /// Pattern.
    pub rw: RwMode,
    /// Block size.
    pub bs: u64,
    /// Queue depth per job.
    pub iodepth: u32,
    /// Jobs.
    pub jobs: u32,
    /// I/O queue pairs the driver got.
    pub queues: usize,
    /// Reads done.
    pub reads: u64,
    /// Writes done.
    pub writes: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Virtual time from the first submission to the last completion, in ns.
    pub runtime_ns: f64,
    /// I/Os per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes_per_s: f64,
    /// Latency (submission to completion, as an application sees it).
    pub lat_ns: LatencyNs,
    /// Bytes read that were checked against what was written.
    pub verified_bytes: u64,
    /// What each link carried from the first submission to the last completion (links that
    /// carried nothing left out; see `Engine::link_traffic`).
    pub links: Vec<smartio_machine::LinkTraffic>,
}

impl FioConfig {
    /// Checks every count and size against its bound (the constants above) before anything
    /// is booted or allocated; errors name the option, the value and the range.
    pub fn check(&self) -> Result<(), FioError> {
        let bad = |e: BadParameter| Err(FioError::BadParameter(e));
        if self.bs == 0 {
            return bad(BadParameter::ZeroBs);
        }
        if !(1..=MAX_IODEPTH).contains(&self.iodepth) {
            return bad(BadParameter::Iodepth {
                iodepth: self.iodepth,
            });
        }
        if !(1..=MAX_JOBS).contains(&self.jobs) {
            return bad(BadParameter::Jobs { jobs: self.jobs });
        }
        let buffers = u64::from(self.jobs)
            .checked_mul(u64::from(self.iodepth))
            .and_then(|n| n.checked_mul(self.bs));
        if buffers.is_none_or(|b| b > MAX_BUFFER_BYTES) {
            return bad(BadParameter::Buffers {
                jobs: self.jobs,
                iodepth: self.iodepth,
                bs: self.bs,
                bytes: buffers,
            });
        }
        match self.amount {
            Amount::Ops(ops) if !(1..=MAX_OPS).contains(&ops) => {
                return bad(BadParameter::Ops { ops });
            }
            Amount::Runtime(runtime) if runtime.as_ps() == 0 || runtime > MAX_RUNTIME => {
                return bad(BadParameter::Runtime { runtime });
            }
            _ => {}
        }
        if self.rwmixread > 100 {
            return bad(BadParameter::Rwmixread {
                percent: self.rwmixread,
            });
        }
        if let Some(size) = self.size.filter(|&s| self.verify && s > MAX_VERIFY_BYTES) {
            return bad(BadParameter::VerifySize { size });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cfg: FioConfig) -> String {
        match cfg.check() {
            Err(FioError::BadParameter(m)) => m.to_string(),
            other => panic!("expected BadParameter, got {other:?}"),
        }
    }

    fn base() -> FioConfig {
        FioConfig::new("host", "nvme0")
    }

    #[test]
    fn the_default_workload_passes_its_checks() {
        assert_eq!(base().check(), Ok(()));
    }

    #[test]
    fn an_iodepth_outside_the_queue_is_refused_with_its_range() {
        for iodepth in [0, MAX_IODEPTH + 1, u32::MAX] {
            let m = refused(FioConfig { iodepth, ..base() });
            assert!(
                m.starts_with(&format!("--iodepth {iodepth}: must be 1..=4095")),
                "{m}"
            );
        }
        assert_eq!(
            FioConfig {
                iodepth: MAX_IODEPTH,
                ..base()
            }
            .check(),
            Ok(())
        );
    }

    #[test]
    fn buffers_in_flight_past_a_gibibyte_are_refused_with_the_product() {
        let m = refused(FioConfig {
            jobs: 3,
            iodepth: 4095,
            bs: 128 << 10,
            ..base()
        });
        assert!(
            m.starts_with("--jobs 3 × --iodepth 4095 × --bs 131072 = 1610219520 bytes"),
            "{m}"
        );
        let m = refused(FioConfig {
            jobs: MAX_JOBS,
            iodepth: MAX_IODEPTH,
            bs: u64::MAX,
            ..base()
        });
        assert!(m.contains("more than 2^64"), "{m}");
    }

    #[test]
    fn counts_and_times_out_of_range_are_refused_by_option() {
        let cases = [
            (FioConfig { bs: 0, ..base() }, "--bs 0"),
            (
                FioConfig { jobs: 0, ..base() },
                "--jobs 0: must be 1..=65535",
            ),
            (
                FioConfig {
                    amount: Amount::Ops(0),
                    ..base()
                },
                "--ops 0: must be 1..=1000000000",
            ),
            (
                FioConfig {
                    amount: Amount::Ops(MAX_OPS + 1),
                    ..base()
                },
                "--ops 1000000001",
            ),
            (
                FioConfig {
                    amount: Amount::Runtime(SimDuration(0)),
                    ..base()
                },
                "--runtime 0 s",
            ),
            (
                FioConfig {
                    amount: Amount::Runtime(SimDuration(u64::MAX)),
                    ..base()
                },
                "at most 3600 s",
            ),
            (
                FioConfig {
                    rwmixread: 101,
                    ..base()
                },
                "--rwmixread 101",
            ),
            (
                FioConfig {
                    verify: true,
                    size: Some(MAX_VERIFY_BYTES + 512),
                    ..base()
                },
                "with --verify: at most 4294967296",
            ),
        ];
        for (cfg, wanted) in cases {
            let m = refused(cfg);
            assert!(m.contains(wanted), "{wanted:?} not in {m}");
        }
    }

    #[test]
    fn an_unknown_rw_mode_is_refused_with_the_modes_there_are() {
        assert_eq!("randrw".parse::<RwMode>(), Ok(RwMode::RandRw));
        let e = "random".parse::<RwMode>().expect_err("not a mode");
        assert_eq!(e, UnknownRwMode("random".into()));
        assert_eq!(
            e.to_string(),
            "unknown --rw \"random\" (read, write, randread, randwrite, randrw)"
        );
    }
}
