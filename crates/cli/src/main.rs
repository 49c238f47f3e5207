//! `smartio`: run and inspect emulated SmartIO clusters.

#![forbid(unsafe_code)]

mod args;
mod commands;
mod demo;
mod exp;
mod render;

// Large DMA buffers come and go for every copy; mimalloc reuses them instead of mapping
// fresh zeroed pages from the kernel each time (which cost more than the simulation).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("smartio: {message}");
            ExitCode::FAILURE
        }
    }
}
