//! `smartio scenarios`: each shipped scenario's name and description.

use crate::error::CliError;
use crate::render;
use smartio_cluster::SHIPPED;

/// `smartio scenarios`: each shipped scenario's name and description.
pub fn run() -> Result<(), CliError> {
    for s in SHIPPED {
        let name = format!("{:<26} ", s.name);
        let description = smartio_cluster::scenarios::description(s);
        print!("{}", render::wrapped(&description, &name, &" ".repeat(27)));
    }
    Ok(())
}
