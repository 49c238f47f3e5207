//! The one error of the `smartio` command: what each layer refused or failed, kept as that
//! layer's typed error, and the command line's own refusals. `main` prints its message after
//! `smartio: `; the message is the layer's own, made where it is shown.
//!
//! Every command returns it, so it names no command: the errors of the CLI's own modules it
//! wraps are each in a file of their own that imports no command (`exp/refusal.rs`,
//! `sweep/error.rs`, `picture/error.rs`, …), and no import leads from here back to a command.

use crate::value_error::ValueError;
use smartio_calibration::CalibrationError;
use smartio_cluster::ClusterError;
use smartio_workloads as workloads;
use std::path::PathBuf;
use thiserror::Error;

/// Why a `smartio` command did not complete.
#[derive(Debug, Error)]
pub enum CliError {
    /// The calibration file does not parse or covers too little.
    #[error(transparent)]
    Calibration(Box<CalibrationError>),
    /// The calibration file cannot be read.
    #[error("--calibration {}: cannot read the calibration: {source}", .path.display())]
    ReadCalibration {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The command's estimate does not fit the budget.
    #[error(transparent)]
    Budget(Box<crate::budget::BudgetError>),
    /// The scenario, or a device of it.
    #[error(transparent)]
    Cluster(Box<ClusterError>),
    /// The topology picture.
    #[error(transparent)]
    Picture(Box<crate::picture::error::PictureError>),
    /// An output file.
    #[error(transparent)]
    OutputFile(Box<crate::outfile::OutputFileError>),
    /// A sweep's grid.
    #[error(transparent)]
    Grid(Box<crate::sweep::error::GridError>),
    /// An experiment refused to run or found its result wrong.
    #[error(transparent)]
    Exp(Box<crate::exp::refusal::ExpError>),
    /// A plot.
    #[error(transparent)]
    Plot(Box<crate::exp::plot::PlotError>),
    /// `smartio repro`.
    #[error(transparent)]
    Repro(Box<crate::repro::error::ReproError>),
    /// A sweep.
    #[error(transparent)]
    Sweep(Box<crate::sweep::error::SweepError>),
    /// A value the command line gives.
    #[error(transparent)]
    Value(Box<ValueError>),
    /// A combination of options, or an option a scenario cannot serve.
    #[error(transparent)]
    Usage(Box<crate::usage::Usage>),
    /// A result that does not serialize (an emulator bug).
    #[error(transparent)]
    Json(Box<serde_json::Error>),
    /// A file the command reads or writes.
    #[error("{}: {source}", .path.display())]
    File {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The trace file cannot be written.
    #[error("--trace {}: {source}", .path.display())]
    Trace {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The explained run measured something else than the first (an emulator bug).
    #[error("emulator bug: the recorded run measured something else than the first run")]
    RecordedDiffers,
    /// The run explained no operation (an emulator bug).
    #[error("no operation of the run was explained")]
    NothingExplained,
    /// nvmeof-compare measured no NVMe-oF read (an emulator bug).
    #[error("nvmeof-compare measured no NVMe-oF read")]
    NoNvmeofRead,
    /// A labelled run of an experiment or figure failed.
    #[error("{run}: {source}")]
    Run {
        /// Which run (its label, host, scenario).
        run: String,
        /// Why.
        source: Box<CliError>,
    },
    /// The cluster daemon would not start or stopped.
    #[error(transparent)]
    Daemon(Box<smartio_live::DaemonError>),
    /// The live view (`cluster up --web`) would not start.
    #[error(transparent)]
    Web(Box<crate::web::error::WebError>),
    /// No cluster daemon answers at the socket.
    #[error("no cluster daemon answers at {path}: {source}")]
    NoDaemon {
        /// The socket.
        path: String,
        /// Why.
        source: smartio_live::protocol::WireError,
    },
    /// The cluster daemon's answer is not the one the request takes.
    #[error("the daemon at {path} answered {reply:?}")]
    DaemonAnswer {
        /// The socket.
        path: String,
        /// What it answered.
        reply: Box<smartio_live::protocol::Reply>,
    },
    /// A call to the cluster daemon failed.
    #[error("the daemon at {path}: {source}")]
    DaemonCall {
        /// The socket.
        path: String,
        /// Why.
        source: smartio_live::protocol::WireError,
    },
    /// The NBD listener could not start.
    #[error("cannot start the listener: {0}")]
    Listener(#[source] std::io::Error),
    /// The NBD server's socket.
    #[error(transparent)]
    Serve(Box<smartio_nbd::server::ServeError>),
    /// This program's own path cannot be found.
    #[error("where is this program? {0}")]
    WhereAmI(#[source] std::io::Error),
    /// No libsisci.so to install.
    #[error(transparent)]
    Library(Box<crate::cluster::library::LibraryError>),
    /// The workbench (an unknown host or device, a refused attach).
    #[error(transparent)]
    Attach(Box<workloads::AttachError>),
    /// Booting the hosts.
    #[error(transparent)]
    Boot(Box<workloads::BootError>),
    /// A block workload (fio, the NVMe demo).
    #[error(transparent)]
    Fio(Box<workloads::FioError>),
    /// `bench dma`.
    #[error(transparent)]
    DmaBench(Box<workloads::DmaBenchError>),
    /// `bench dma --adapter`: the error and the errors it came from, as one line.
    #[error("{}", error_chain(.0))]
    AdapterDma(Box<workloads::AdapterDmaBenchError>),
    /// `bench engine`.
    #[error(transparent)]
    EngineBench(Box<workloads::EngineBenchError>),
    /// `bench topo`.
    #[error(transparent)]
    TopoBench(Box<workloads::TopoBenchError>),
    /// Shared-memory workloads (`bench pio`, `pingpong` between CPUs).
    #[error(transparent)]
    Shm(Box<workloads::ShmError>),
    /// Peer-to-peer DMA workloads.
    #[error(transparent)]
    P2p(Box<workloads::P2pError>),
    /// GPU workloads and applications.
    #[error(transparent)]
    Gpu(Box<workloads::GpuWorkloadError>),
    /// `app video`.
    #[error(transparent)]
    Video(Box<smartio_apps::video::VideoError>),
    /// `iperf`.
    #[error(transparent)]
    Iperf(Box<smartio_net::IperfError>),
    /// `exp migrate`.
    #[error(transparent)]
    Migrate(Box<workloads::MigrateError>),
    /// `exp failover`.
    #[error(transparent)]
    Failover(Box<workloads::FailoverError>),
    /// `exp share-30`.
    #[error(transparent)]
    Share(Box<workloads::ShareError>),
    /// `exp multicast`.
    #[error(transparent)]
    Multicast(Box<workloads::MulticastIdentifyError>),
    /// NVMe-oF comparisons.
    #[error(transparent)]
    Nvmeof(Box<smartio_nvmeof::NvmeofError>),
    /// The client's queue-depth-1 run.
    #[error(transparent)]
    ClientQd1(Box<workloads::ClientQd1Error>),
    /// The NBD export.
    #[error(transparent)]
    Nbd(Box<workloads::nbd::NbdError>),
}

/// `From` each layer's error: boxed, so that a `Result<_, CliError>` stays small.
macro_rules! boxed_from {
    ($($variant:ident: $error:ty,)*) => {
        $(impl From<$error> for CliError {
            fn from(e: $error) -> CliError {
                CliError::$variant(Box::new(e))
            }
        })*
    };
}

boxed_from! {
    Calibration: CalibrationError,
    Budget: crate::budget::BudgetError,
    Cluster: ClusterError,
    Picture: crate::picture::error::PictureError,
    OutputFile: crate::outfile::OutputFileError,
    Grid: crate::sweep::error::GridError,
    Exp: crate::exp::refusal::ExpError,
    Plot: crate::exp::plot::PlotError,
    Repro: crate::repro::error::ReproError,
    Sweep: crate::sweep::error::SweepError,
    Value: ValueError,
    Usage: crate::usage::Usage,
    Json: serde_json::Error,
    Daemon: smartio_live::DaemonError,
    Web: crate::web::error::WebError,
    Serve: smartio_nbd::server::ServeError,
    Library: crate::cluster::library::LibraryError,
    Attach: workloads::AttachError,
    Boot: workloads::BootError,
    Fio: workloads::FioError,
    DmaBench: workloads::DmaBenchError,
    AdapterDma: workloads::AdapterDmaBenchError,
    EngineBench: workloads::EngineBenchError,
    TopoBench: workloads::TopoBenchError,
    Shm: workloads::ShmError,
    P2p: workloads::P2pError,
    Gpu: workloads::GpuWorkloadError,
    Video: smartio_apps::video::VideoError,
    Iperf: smartio_net::IperfError,
    Migrate: workloads::MigrateError,
    Failover: workloads::FailoverError,
    Share: workloads::ShareError,
    Multicast: workloads::MulticastIdentifyError,
    Nvmeof: smartio_nvmeof::NvmeofError,
    ClientQd1: workloads::ClientQd1Error,
    Nbd: workloads::nbd::NbdError,
}

/// An error and the errors it came from, as one line (a cause whose message an error
/// already shows is not repeated).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

impl CliError {
    /// `source`, labelled with the run it failed in.
    pub fn run(run: impl Into<String>, source: impl Into<CliError>) -> CliError {
        CliError::Run {
            run: run.into(),
            source: Box::new(source.into()),
        }
    }

    /// No daemon answers at `path`.
    pub fn no_daemon(path: &str) -> impl FnOnce(smartio_live::protocol::WireError) -> CliError {
        let path = path.to_string();
        move |source| CliError::NoDaemon { path, source }
    }

    /// The daemon at `path` answered `reply`, which the request does not take.
    pub fn answered(path: &str, reply: smartio_live::protocol::Reply) -> CliError {
        CliError::DaemonAnswer {
            path: path.to_string(),
            reply: Box::new(reply),
        }
    }

    /// A file error at `path`.
    pub fn file(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> CliError {
        let path = path.into();
        move |source| CliError::File { path, source }
    }
}
