//! `smartio app video`: multi-stream video analysis on a pool of GPUs (Paper II).

use smartio_calibration::Calibration;

/// `smartio app video` arguments.
#[derive(clap::Args, Debug)]
pub struct VideoArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `smartio app video`.
pub fn run(_calibration: &Calibration, _args: VideoArgs) -> Result<(), String> {
    Err("app video: not built yet".into())
}
