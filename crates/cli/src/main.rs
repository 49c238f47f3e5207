//! `smartio`: run and inspect emulated SmartIO clusters.

#![forbid(unsafe_code)]

/// `std::println!`, except that a closed stdout pipe ends the program quietly
/// ([`output::write`]).
macro_rules! println {
    () => {
        $crate::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `std::print!`, except that a closed stdout pipe ends the program quietly.
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!($($arg)*))
    };
}

mod adapter_dma;
mod app;
mod args;
mod budget;
mod cluster;
mod commands;
mod contrast;
mod demo;
mod dma;
mod error;
mod exp;
mod explain;
mod gpu;
mod iperf;
mod outfile;
mod output;
mod picture;
mod pingpong;
mod progress;
mod render;
mod repro;
mod serve;
mod sweep;
mod usage;
mod value_error;

// Large DMA buffers come and go for every copy; mimalloc reuses them instead of mapping
// fresh zeroed pages from the kernel each time (which cost more than the simulation).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    let _progress = progress::install_on_terminal();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("smartio: {error}");
            ExitCode::FAILURE
        }
    }
}
