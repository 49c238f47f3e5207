//! Standard output that survives a closed pipe: `smartio demo | head` must end quietly, not
//! panic as `std::println!` does when the reader has gone. The crate's `println!` and
//! `print!` (defined in `main.rs`) come here, and every command's `--json` ([`print_json`]).

use std::io::{ErrorKind, Write};

/// Writes `args` to stdout. A reader that closed the pipe ends the program with status 0
/// (it has what it wanted); any other write error ends it with status 1 and a message.
pub fn write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("smartio: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// Prints a result as pretty JSON.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), crate::error::CliError> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
