//! `smartio app train`: data-parallel CNN training on GPUs and an NVMe (Paper V Fig. 30).

use smartio_calibration::Calibration;

/// `smartio app train` arguments.
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `smartio app train`.
pub fn run(_calibration: &Calibration, _args: TrainArgs) -> Result<(), String> {
    Err("app train: not built yet".into())
}
