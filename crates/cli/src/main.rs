//! `smartio`: run and inspect emulated SmartIO clusters.
//!
//! # Inside this crate
//!
//! Argument parsing and presentation only, as a table of commands: each command is a module
//! (a folder for a command with subcommands) that owns its clap options and its run —
//! `scenarios`, `topo`, `devices`, `bench` (`bench/`: `dma`, with `--adapter` in
//! `adapter_dma`, `pio`, `p2p` and `gpu-p2p`, `gpu-bandwidth`, `engine`, `topo`),
//! `pingpong`, `fio`, `iperf`, `app train`, `app video`, `exp`, `repro`, `sweep`, `serve nbd`
//! (module `serve`: listens before anything boots, so a socket in use is an error at once, turns
//! transparent huge pages off for the process — the first random writes into a namespace
//! otherwise had the kernel zero 2 MiB pages for 4 KiB ones, a third of the write rate — and
//! stops on SIGINT/SIGTERM through `ctrlc`, printing the figures — `dropped: N` among them —
//! and the controller's command counts, then flushing the writes acknowledged since the last
//! FLUSH, exit status 1 if that fails), `cluster up`/`down`/`install`/`stats` (module
//! `cluster`: the live engine's daemon and libsisci's installation), `cluster up --web` (module
//! `web/`, below), `demo`; tables on the
//! terminal and `--json`. `app` presents the applications (`smartio-apps`); `repro` (module
//! `repro/`) runs the papers' figures — each a statement with its source line, a run of
//! workloads or experiments (an `exp::Experiment`'s run, shared with `exp`), and a verdict computed by a
//! stated rule — and writes the HTML report (`Plot::svg` inlines the figures); Paper I's
//! figures are in `repro/paper1.rs`, Paper III's (with Paper IV's versions, on `mesh-3`) in
//! `repro/paper3.rs` (bandwidth) and `repro/paper3_latency.rs` (ping-pong), Paper V's Figs. 21, 33 and 38 in `repro/paper5.rs` (the older
//! statements in `repro/figures.rs`, which registers the others; `figure` is what a figure and
//! its run are, `rules` the verdicts' shared rules). `args` holds the global options and the
//! table of commands (each entry a command's own clap type); `main.rs` parses, installs the
//! progress bar, runs and maps the error to the exit status; `commands` is the dispatcher
//! (the calibration, the budget's check, the command's run). Below every command are leaf
//! modules that import no command: `values` (one typed range check per option,
//! and `--direction`), `output` (the pipe-safe `println!` and `--json`), `cells` (the
//! experiments' tables and numbers), `hosts` (the host a command runs on when none is named),
//! `nvme_options` (what fio and `serve nbd` share), `render`, `usage` and `value_error`, and
//! `error`, whose `error::CliError` wraps each module's own error from a file of its own
//! that imports no command. `budget` estimates what every command's input costs before it runs — one model
//! per command (`budget::models`, an exhaustive match over the commands, so a new command
//! needs one; an experiment's is its own `cost`, a sweep's `budget::sweep`) over the work the input asks for, at rates measured on the emulator
//! (`budget::rates`, each with the run it came from) — and refuses an estimate over 60 s or
//! 2 GiB unless `--no-budget` (a global option) says to run it, in which case it says so on
//! standard error first; the adversarial corpus checks that nothing runs longer or larger
//! without that note. The servers (`serve nbd`, `cluster up`) have no estimate (`bench p2p`
//! and device `pingpong` take the GPU path when a device is a GPU); `demo` tells the one story of `smartio demo` (all its
//! narration lives there): each row is a run's median operation, its critical path recorded in
//! a second identical run, and `contrast` turns two critical paths into the parts of their
//! difference (the steps one took and the other did not, each hardware class's share), which
//! add up to it exactly — the demo's explanations are computed, and a test reads them back
//! and checks their sums; `render` draws tables in at most 100 columns with units
//! spelled out; `progress` draws an indicatif bar on a terminal after a second; `output` ends the
//! program quietly when a pipe reader goes away. `exp` (module `exp/`) is a table of
//! experiments: one file each, implementing `exp::Experiment` (name and help, default
//! scenario, the options it takes, its cost for the budget, its run), and one list,
//! `exp::EXPERIMENTS`, that `exp NAME` parses, lists in `--help` and runs through; an
//! experiment chooses its workload's parameters, runs it and presents it, on a `Setup` that
//! parses each scenario once however many clusters it boots of it; `exp/plot.rs` draws
//! the SVG figures with plotters' SVG backend, written only with `--plots DIR`. `picture/`
//! draws the whole cluster for `topo --svg` and for `repro`'s report (a picture of each scenario
//! the figures ran on, and for `cluster up --web` with the devices borrowed now): `layout` turns
//! a fabric and the registry's fdids (and a running cluster's borrowings) into boxes, labels and
//! lines with coordinates (pure; `host` lays out one host, `switches` and `grid` place the
//! cluster switches and the hosts under each, `parts` is what they share — margin, fdids,
//! lendings — as a leaf so they import in no loop, `geometry` holds the shapes and the overlap
//! rule every picture is checked against before it is written), `svg` writes them as SVG text by hand; `outfile` is a typed output path (`--svg FILE`), refused when the arguments are
//! parsed if it cannot be a file, and written atomically. `sweep`
//! (module `sweep/`) runs a grid of independent runs: `grid` expands a TOML grid (`[fixed]`
//! options, `[vary]` lists, every combination in a fixed order) and checks each run's command
//! line with the same clap types; `run` runs them as child processes of this same binary with
//! `--json` on a rayon pool (a run is a plain process, so its result is the JSON value the
//! command prints alone — written compactly, keys sorted — and shards on other machines are the
//! same processes); `merge` joins
//! shards' JSON lines, each checked against the grid, into the whole sweep's lines. Shipped grids
//! are `sweeps/*.toml`, embedded like the scenarios.
//!
//! `web/` is the live view of a running cluster (`cluster up --web ADDR`): `address` checks the
//! option (IP:PORT; loopback unless `--web-allow-remote`, refused with `WebError::NotLoopback`
//! before the cluster is built, as is an address that cannot be bound); `watch` is a thread that
//! asks the daemon for its figures (`Request::Stats`, as `cluster stats` does) every 100 ms and
//! keeps the latest update, drawing the scenario's picture again (`picture::live_element`, the
//! borrowed devices as arrows to their borrowers, `parts::borrowings`) only when the borrowings
//! change; `serve` is the HTTP server (tiny_http, plain HTTP): `GET /` is `page` (one
//! self-contained page, `page.html`, inline CSS, script and SVG, which draws the tables and
//! per-link sparklines from the updates, keeps a bounded history, and says "stale" or
//! "disconnected" rather than showing old state as live), `GET /events` a Server-Sent Events
//! stream per browser (a thread each, at most 32) sending the update when it changes and at
//! least every second, the picture only when the page's is older, and `GET /metrics` the
//! Prometheus text (`metrics`) of figures asked afresh, so a scrape equals `cluster stats --json`
//! at that moment. Why a client of the daemon rather than part of it: the daemon's one thread is
//! the emulation (it polls register pages every 20 µs while a program maps them); HTTP clients,
//! slow browsers and scrapes must not stall it or add latency to a program's store, and a view
//! that only speaks the daemon's public protocol cannot change what it shows. The daemon pays
//! one `Stats` answer per poll and per scrape, between its other requests.
//!
//! Its tests run every README example and every command the demo suggests (`tests/readme.rs`)
//! and an adversarial corpus of bad and extreme input (`tests/adversarial/cases.toml`, run by
//! `tests/adversarial.rs` under a watchdog and a memory limit). `tests/golden.rs` compares the
//! JSON of six named runs (fio QD1 on back-to-back, exp share-30, iommu-penalty and vm-nvme, the
//! vm-back-to-back ping-pong, bench engine's counters) byte for byte with `tests/golden/`, so
//! work on the engine's speed cannot move a result; `SMARTIO_BLESS=1` re-records them (once, in
//! a commit that says why).

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

mod app;
mod args;
mod bench;
mod budget;
mod cells;
mod cluster;
mod commands;
mod contrast;
mod demo;
mod devices;
mod error;
mod exp;
mod explain;
mod fio;
mod hosts;
mod iperf;
mod nvme_options;
mod outfile;
mod output;
mod picture;
mod pingpong;
mod progress;
mod render;
mod repro;
mod scenarios;
mod serve;
mod sweep;
mod topo;
mod usage;
mod value_error;
mod values;
mod web;

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
