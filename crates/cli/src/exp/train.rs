//! `exp train`.

use super::{Report, Setup};

pub fn run(_setup: &Setup) -> Result<Report, String> {
    Err("exp train: not built yet".into())
}
