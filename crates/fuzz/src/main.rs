//! `smartio-fuzz`: a stable, seeded fuzz runner for CI, and a replayer.
//!
//! `run <target|all> --time 30s --seed N` replays each target's corpus, then mutates corpus
//! inputs deterministically from the seed (see `smartio_fuzz::mutate`) until the time or
//! `--runs` budget is spent, keeping mutants whose outcome has a new shape. A panic, an input
//! that runs longer than `--timeout`, or a process that grows past `--rss-limit-mb` saves the
//! input under `--out` and exits non-zero naming the file. `replay <target> FILE...` runs
//! files through a target and prints each outcome.

use clap::{Parser, Subcommand};
use smartio_fuzz::mutate::{mutate, Rng};
use smartio_fuzz::{corpus, Outcome, Target, TARGETS};
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "smartio-fuzz",
    about = "Fuzz smartio's parsers, NVMe controller, GPU and APIs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay the corpus, then fuzz for a time or run budget.
    Run {
        /// A target (scenario, calibration, nvme_commands, device_api, config_space, vm_config,
        /// gpu_commands, nic_commands, nbd_requests, live_requests, adapter_dma) or `all`.
        target: String,
        /// Wall-clock budget per target, e.g. 30s, 2m, 500ms.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        time: Duration,
        /// Stop a target after this many mutated inputs (reproducible runs).
        #[arg(long)]
        runs: Option<u64>,
        /// Seed of the mutations.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Where failing inputs are written.
        #[arg(long, default_value = "fuzz-failures")]
        out: PathBuf,
        /// An input running longer than this (wall clock) is a hang.
        #[arg(long, default_value = "20s", value_parser = parse_duration)]
        timeout: Duration,
        /// Resident memory above this many MiB is a failure.
        #[arg(long, default_value_t = 2048)]
        rss_limit_mb: u64,
    },
    /// Run files through a target and print each outcome.
    Replay {
        /// The target.
        target: String,
        /// Input files.
        files: Vec<PathBuf>,
    },
    /// Print the operations an input decodes to (nvme_commands, device_api, config_space,
    /// vm_config, gpu_commands, nic_commands, live_requests, adapter_dma; nbd_requests prints
    /// what the server made of it).
    Decode {
        /// The target.
        target: String,
        /// The input file.
        file: PathBuf,
    },
    /// List the targets and their corpus sizes.
    List,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?}: expected a duration such as 30s, 2m or 500ms");
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| s.split_at(i));
    let n: u64 = number.parse().map_err(|_| bad())?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        _ => Err(bad()),
    }
}

fn targets(name: &str) -> Result<Vec<Target>, String> {
    if name == "all" {
        return Ok(TARGETS.to_vec());
    }
    smartio_fuzz::target(name).map(|t| vec![t]).ok_or_else(|| {
        let known: Vec<_> = TARGETS.iter().map(|t| t.name).collect();
        format!("unknown target {name:?} (known: {}, all)", known.join(", "))
    })
}

/// What the watchdog needs to report a hang.
struct Current {
    target: &'static str,
    input: Vec<u8>,
    started: Instant,
}

struct Failure {
    kind: &'static str,
    message: String,
    input: Vec<u8>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::List => {
            for t in TARGETS {
                let n = corpus::inputs(t.name).map_or(0, |i| i.len());
                println!("{:<14} {n} corpus inputs", t.name);
            }
            ExitCode::SUCCESS
        }
        Command::Replay { target, files } => replay(&target, &files),
        Command::Decode { target, file } => {
            let data = match std::fs::read(&file) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("smartio-fuzz: {}: {e}", file.display());
                    return ExitCode::from(2);
                }
            };
            match target.as_str() {
                "nvme_commands" => smartio_fuzz::nvme::ops::decode(&data)
                    .iter()
                    .for_each(|o| println!("{o:?}")),
                "device_api" => smartio_fuzz::device_api::ops::decode(&data)
                    .iter()
                    .for_each(|o| println!("{o:?}")),
                "gpu_commands" => smartio_fuzz::gpu::ops::decode(&data)
                    .iter()
                    .for_each(|o| println!("{o:?}")),
                "nic_commands" => {
                    println!("MTU {}", smartio_fuzz::nic::mtu(&data));
                    smartio_fuzz::nic::ops::decode(data.get(1..).unwrap_or(&[]))
                        .iter()
                        .for_each(|o| println!("{o:?}"));
                }
                "config_space" => {
                    let mut input = smartio_fuzz::input::Input::new(&data);
                    println!(
                        "{:#?}",
                        smartio_fuzz::config_space::layout::decode(&mut input)
                    );
                    smartio_fuzz::config_space::ops::decode(&mut input)
                        .iter()
                        .for_each(|o| println!("{o:?}"));
                }
                "vm_config" => {
                    let mut input = smartio_fuzz::input::Input::new(&data);
                    match smartio_fuzz::vm_config::ops::setup(&mut input) {
                        Ok(setup) => {
                            println!("{setup:?}");
                            smartio_fuzz::vm_config::ops::decode(&mut input)
                                .iter()
                                .for_each(|o| println!("{o:?}"));
                        }
                        Err(e) => println!("refused: {e}"),
                    }
                }
                "nbd_requests" => {
                    println!("{:?}", smartio_fuzz::nbd_requests(&data));
                }
                "adapter_dma" => smartio_fuzz::adapter_dma::ops::decode(&data)
                    .iter()
                    .for_each(|o| println!("{o:?}")),
                "live_requests" => {
                    let plan = smartio_fuzz::live::ops::decode(&data);
                    println!("sessions {:?}", plan.sessions);
                    plan.ops.iter().for_each(|o| println!("{o:?}"));
                }
                _ => {
                    eprintln!("smartio-fuzz: {target:?} inputs are text; nothing to decode");
                    return ExitCode::from(2);
                }
            }
            ExitCode::SUCCESS
        }
        Command::Run {
            target,
            time,
            runs,
            seed,
            out,
            timeout,
            rss_limit_mb,
        } => {
            let list = match targets(&target) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("smartio-fuzz: {e}");
                    return ExitCode::from(2);
                }
            };
            if cfg!(panic = "abort") {
                eprintln!(
                    "smartio-fuzz: this build aborts on a panic, so a finding would end the run \
                     unreported: build the runner in a profile that unwinds \
                     (cargo run -p smartio-fuzz --profile suite -- run ...)"
                );
                return ExitCode::from(2);
            }
            quiet_panics();
            let current = Arc::new(Mutex::new(None::<Current>));
            watchdog(current.clone(), timeout, out.clone());
            for t in list {
                let budget = Budget {
                    time,
                    runs,
                    seed,
                    rss_limit_mb,
                };
                if let Err(f) = fuzz(t, &budget, &current) {
                    let path = save(&out, t.name, seed, &f.input);
                    eprintln!(
                        "smartio-fuzz: {}: {} — input saved to {}\n{}",
                        t.name, f.kind, path, f.message
                    );
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
    }
}

fn replay(target: &str, files: &[PathBuf]) -> ExitCode {
    let t = match targets(target) {
        Ok(t) if t.len() == 1 => t[0],
        Ok(_) => {
            eprintln!("smartio-fuzz: replay takes one target, not `all`");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("smartio-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    for f in files {
        let data = match std::fs::read(f) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("smartio-fuzz: {}: {e}", f.display());
                return ExitCode::from(2);
            }
        };
        let out = (t.run)(&data);
        println!(
            "{}: {} {}",
            f.display(),
            if out.accepted { "accepted" } else { "rejected" },
            out.detail
        );
    }
    ExitCode::SUCCESS
}

struct Budget {
    time: Duration,
    runs: Option<u64>,
    seed: u64,
    rss_limit_mb: u64,
}

thread_local! {
    static PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    /// Whether this thread is running a target on an input (where panics are findings).
    static IN_TARGET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics inside a target are caught and reported once, with their location, instead of
/// printed each time; a panic anywhere else is the runner's own and is printed as usual.
fn quiet_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !IN_TARGET.with(|t| t.get()) {
            default(info);
            return;
        }
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{at}")));
    }));
}

fn run_one(t: Target, input: &[u8], current: &Mutex<Option<Current>>) -> Result<Outcome, Failure> {
    if let Ok(mut c) = current.lock() {
        *c = Some(Current {
            target: t.name,
            input: input.to_vec(),
            started: Instant::now(),
        });
    }
    IN_TARGET.with(|t| t.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| (t.run)(input)));
    IN_TARGET.with(|t| t.set(false));
    if let Ok(mut c) = current.lock() {
        *c = None;
    }
    r.map_err(|_| Failure {
        kind: "panic",
        message: PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "a panic".into()),
        input: input.to_vec(),
    })
}

/// The shape of an outcome: its text without digits (new shapes join the pool).
fn shape(o: &Outcome) -> String {
    let s: String = o
        .detail
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(300)
        .collect();
    format!("{}{s}", o.accepted)
}

fn fuzz(t: Target, b: &Budget, current: &Mutex<Option<Current>>) -> Result<(), Failure> {
    let start = Instant::now();
    let mut pool: Vec<Vec<u8>> = match corpus::inputs(t.name) {
        Ok(i) => i.into_iter().map(|(_, d)| d).collect(),
        Err(e) => {
            return Err(Failure {
                kind: "unreadable corpus",
                message: e.to_string(),
                input: Vec::new(),
            })
        }
    };
    let corpus_len = pool.len();
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let mut shapes = BTreeSet::new();
    for input in pool.clone() {
        shapes.insert(shape(&run_one(t, &input, current)?));
    }
    let mut rng = Rng::new(b.seed ^ fnv_bytes(t.name.as_bytes()));
    let mut execs = 0u64;
    while start.elapsed() < b.time && b.runs.is_none_or(|r| execs < r) {
        let a = rng.below(pool.len());
        let o = rng.below(pool.len());
        let mutant = mutate(&pool[a], &pool[o], t.text, &mut rng);
        let out = run_one(t, &mutant, current)?;
        execs += 1;
        if shapes.insert(shape(&out)) && pool.len() < 4096 {
            pool.push(mutant.clone());
        }
        if let Some(mb) = rss_mb().filter(|&mb| mb > b.rss_limit_mb) {
            return Err(Failure {
                kind: "memory",
                message: format!(
                    "resident memory {mb} MiB exceeds {} MiB after this input",
                    b.rss_limit_mb
                ),
                input: mutant,
            });
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:<14} {execs} execs in {secs:.1} s ({:.0} exec/s), {corpus_len} corpus inputs, pool {}, {} outcome shapes, 0 failures",
        t.name,
        execs as f64 / secs.max(1e-9),
        pool.len(),
        shapes.len()
    );
    Ok(())
}

/// Resident set size of this process, from /proc (None where there is no /proc).
fn rss_mb() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096 / (1 << 20))
}

fn save(out: &Path, target: &str, seed: u64, input: &[u8]) -> String {
    let path = out.join(format!("{target}-seed{seed}-{:016x}.bin", fnv_bytes(input)));
    let written = std::fs::create_dir_all(out).and_then(|()| std::fs::write(&path, input));
    match written {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("(could not write {}: {e})", path.display()),
    }
}

/// FNV-1a of `b`.
fn fnv_bytes(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A thread that ends the process when one input runs longer than `timeout`.
fn watchdog(current: Arc<Mutex<Option<Current>>>, timeout: Duration, out: PathBuf) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(200));
        let hung = current.lock().ok().and_then(|c| {
            c.as_ref()
                .filter(|c| c.started.elapsed() > timeout)
                .map(|c| (c.target, c.input.clone()))
        });
        if let Some((target, input)) = hung {
            let path = save(&out, target, 0, &input);
            eprintln!(
                "smartio-fuzz: {target}: hang — one input ran longer than {timeout:?}; input saved to {path}"
            );
            std::process::exit(3);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_shape_is_cut_at_a_character_not_a_byte() {
        // 299 ASCII letters, then a two-byte character across the 300th byte.
        let detail = format!("{}µs and more", "a".repeat(299));
        let s = shape(&Outcome {
            accepted: false,
            detail,
        });
        assert_eq!(s, format!("false{}µ", "a".repeat(299)));
    }

    #[test]
    fn an_outcome_shape_drops_digits() {
        let s = shape(&Outcome {
            accepted: true,
            detail: "12 reads in 3.5 µs".into(),
        });
        assert_eq!(s, "true reads in . µs");
    }
}
