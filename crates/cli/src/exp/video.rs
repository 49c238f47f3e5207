//! `exp video`.

use super::{Report, Setup};

pub fn run(_setup: &Setup) -> Result<Report, String> {
    Err("exp video: not built yet".into())
}
