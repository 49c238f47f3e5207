//! `smartio app NAME`: applications on local and lent devices — the papers' CNN training
//! (Paper V Fig. 30) and multi-stream video analysis (Paper II). Each prints a table (or
//! JSON with `--json`); the experiments that sweep them are `exp train` and `exp video`.

mod train;
pub(crate) mod video;

pub use train::TrainArgs;
pub use video::VideoArgs;

use crate::error::CliError;
use clap::Subcommand;
use smartio_calibration::Calibration;

/// The applications.
#[derive(Subcommand, Debug)]
pub enum App {
    /// Data-parallel CNN training (VGG19 transfer learning, as Paper V Fig. 30): batches
    /// read from an NVMe, copied to each GPU, forward/backward kernels, gradients exchanged
    /// between the GPUs, weights updated; per-epoch time and where it went.
    Train(TrainArgs),
    /// N parallel full-HD video streams decoded on the CPU, features extracted by a pool of
    /// GPUs (local and borrowed) a scheduler assigns frames to (Paper II).
    Video(VideoArgs),
}

/// Runs `smartio app`.
pub fn run(calibration: &Calibration, app: App) -> Result<(), CliError> {
    match app {
        App::Train(args) => train::run(calibration, args),
        App::Video(args) => video::run(calibration, args),
    }
}
