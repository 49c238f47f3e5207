//! The adversarial corpus (issue 13): bad and extreme input to every command — command-line
//! values, scenario files, calibration files — run against the built `smartio` binary.
//!
//! The cases are data, in `tests/adversarial/cases.toml` (its header says how to write one).
//! Each runs in its own empty directory, under a 4 GiB address-space limit and a 60 s
//! watchdog, two at a time, its peak resident memory sampled (`VmHWM`, every 10 ms). No
//! command may run longer than 60 s or above 2 GiB without having said so before it started
//! (the budget's note, `smartio: note: over budget:`, which `--no-budget` prints; a case
//! that said so may run up to ten minutes). A case passes when the binary
//!
//! - did not panic (exit 101, "panicked"), abort or die by a signal (an allocation beyond
//!   the limit aborts), and finished before the watchdog;
//! - stayed under 2 GiB of resident memory, or said first that it would not;
//! - for `expect = "error"`: exited non-zero and said every `contains` text on stderr;
//! - for `expect = "ok"`: exited 0 and printed every `contains` text on stdout, and none of
//!   `absent`;
//! - wrote no file into its directory but those the case lists in `writes`.
//!
//! Every failure is collected and reported together, with a count per class. Set
//! `SMARTIO_CASES=text` to run only the cases whose name contains `text`, and
//! `SMARTIO_BIN=path` to run the corpus against another build of `smartio`.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest a case may run before the watchdog kills it.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Longest a case that said it is over the budget may run.
const WATCHDOG_ANNOUNCED: Duration = Duration::from_secs(600);

/// Most resident memory a case may reach without having said so.
const PEAK_LIMIT: u64 = 2 << 30;

/// How a run over the budget says so before it starts (`budget::NOTE_PREFIX`).
const ANNOUNCED: &str = "smartio: note: over budget:";

/// Address space a case may use (`ulimit -v`, KiB): far above what any valid case needs,
/// far below what would endanger the machine.
const ADDRESS_SPACE_KIB: u64 = 4 << 20;

/// Cases run at once.
const THREADS: usize = 2;

/// The corpus must keep at least this many cases.
const MIN_CASES: usize = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Expect {
    Error,
    Ok,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// Unique, read as what is tried.
    name: String,
    /// The class of input, for the summary.
    class: String,
    /// Arguments after `smartio`; `{dir}` is the case's directory.
    args: Vec<String>,
    expect: Expect,
    /// Texts stderr (error) or stdout (ok) must contain; `{dir}` as in `args`.
    #[serde(default)]
    contains: Vec<String>,
    /// Texts stdout must not contain (ok cases).
    #[serde(default)]
    absent: Vec<String>,
    /// Files to write into the case's directory first.
    #[serde(default)]
    files: Vec<FileSpec>,
    /// Files the run may create in its directory.
    #[serde(default)]
    writes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    /// File name in the case's directory.
    name: String,
    /// The whole content, or
    #[serde(default)]
    text: Option<String>,
    /// a file of the repository (path from its root) to start from,
    #[serde(default)]
    base: Option<String>,
    /// with each `[from, to]` replaced (`from` must occur exactly once),
    #[serde(default)]
    replace: Vec<[String; 2]>,
    /// and this appended.
    #[serde(default)]
    append: Option<String>,
}

/// The binary under test: this build's, or `SMARTIO_BIN` (to run the corpus against another
/// build).
fn binary() -> String {
    std::env::var("SMARTIO_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_smartio").to_string())
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The content of `f`, or why the corpus entry itself is wrong.
fn content(f: &FileSpec) -> Result<String, String> {
    let mut text = match (&f.text, &f.base) {
        (Some(t), None) => t.clone(),
        (None, Some(base)) => std::fs::read_to_string(repo_root().join(base))
            .map_err(|e| format!("base {base}: {e}"))?,
        _ => return Err(format!("file {}: give exactly one of text, base", f.name)),
    };
    for [from, to] in &f.replace {
        match text.matches(from.as_str()).count() {
            1 => text = text.replacen(from.as_str(), to, 1),
            n => {
                return Err(format!(
                    "file {}: {from:?} occurs {n} times in the base (must be once)",
                    f.name
                ))
            }
        }
    }
    if let Some(more) = &f.append {
        text.push_str(more);
    }
    Ok(text)
}

/// What one run did.
struct Outcome {
    status: Option<ExitStatus>,
    timed_out: bool,
    stdout: String,
    stderr: String,
    stray: Vec<String>,
    elapsed: Duration,
    /// Peak resident memory, bytes (the last `VmHWM` sampled).
    peak: u64,
}

/// The peak resident memory of process `pid` so far (`VmHWM`), if it is still there.
fn high_water_mark(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs `case` in `dir`.
fn run(case: &Case, dir: &Path) -> Result<Outcome, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for f in &case.files {
        std::fs::write(dir.join(&f.name), content(f)?)
            .map_err(|e| format!("writing {}: {e}", f.name))?;
    }
    let d = dir.to_string_lossy();
    let args: Vec<String> = case.args.iter().map(|a| a.replace("{dir}", &d)).collect();
    let (out_path, err_path) = (dir.join(".stdout"), dir.join(".stderr"));
    let file = |p: &Path| std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(binary())
        .args(&args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut timed_out = false;
    let mut peak = 0;
    // `sh` execs smartio, so the child's pid is smartio's.
    let pid = child.id();
    let announced = || std::fs::read_to_string(&err_path).is_ok_and(|e| e.contains(ANNOUNCED));
    let status = loop {
        if let Some(hwm) = high_water_mark(pid) {
            peak = peak.max(hwm);
        }
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None)
                if started.elapsed() > WATCHDOG
                    && (started.elapsed() > WATCHDOG_ANNOUNCED || !announced()) =>
            {
                let _ = child.kill();
                let _ = child.wait();
                timed_out = true;
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    let elapsed = started.elapsed();
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let mut expected: Vec<String> = case.files.iter().map(|f| f.name.clone()).collect();
    expected.extend(case.writes.iter().cloned());
    expected.extend([".stdout".to_string(), ".stderr".to_string()]);
    let stray = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !expected.contains(n))
        .collect();
    Ok(Outcome {
        status,
        timed_out,
        stdout: read(&out_path),
        stderr: read(&err_path),
        stray,
        elapsed,
        peak,
    })
}

/// Why `o` does not meet `case`, if it does not.
fn judge(case: &Case, dir: &Path, o: &Outcome) -> Vec<String> {
    let d = dir.to_string_lossy();
    let mut why = Vec::new();
    let said_so = o.stderr.contains(ANNOUNCED);
    if o.timed_out {
        why.push(if said_so {
            format!(
                "ran past {} s although it had said it was over the budget",
                WATCHDOG_ANNOUNCED.as_secs()
            )
        } else {
            format!(
                "hung: killed after {} s without having said it would run that long",
                WATCHDOG.as_secs()
            )
        });
        return why;
    }
    if o.peak > PEAK_LIMIT && !said_so {
        why.push(format!(
            "reached {} MiB of resident memory, above {} MiB, without having said so first",
            o.peak >> 20,
            PEAK_LIMIT >> 20
        ));
    }
    let code = o.status.and_then(|s| s.code());
    if o.status.is_some() && code.is_none() {
        why.push(format!(
            "killed by a signal ({:?}){}",
            o.status,
            if o.stderr.contains("memory allocation") {
                " after a failed allocation"
            } else {
                ""
            }
        ));
    }
    if code == Some(101) || o.stderr.contains("panicked") {
        why.push("panicked".into());
    }
    if o.stderr.contains("memory allocation") {
        why.push("ran out of memory".into());
    }
    let (text, stream) = match case.expect {
        Expect::Error => {
            if code == Some(0) {
                why.push("exited 0 on invalid input".into());
            }
            (&o.stderr, "stderr")
        }
        Expect::Ok => {
            if code != Some(0) {
                why.push(format!("exited {code:?} on valid input"));
            }
            (&o.stdout, "stdout")
        }
    };
    for c in &case.contains {
        let c = c.replace("{dir}", &d);
        if !text.contains(&c) {
            why.push(format!("{stream} lacks {c:?}"));
        }
    }
    for a in &case.absent {
        if o.stdout.contains(a.as_str()) {
            why.push(format!("stdout contains {a:?}"));
        }
    }
    if !o.stray.is_empty() {
        why.push(format!("wrote files it was not asked to: {:?}", o.stray));
    }
    why
}

/// One case after its run.
struct Ran {
    class: String,
    name: String,
    /// The report, if the case failed.
    failure: Option<String>,
    elapsed: Duration,
    peak: u64,
}

/// The first lines of `text`, indented.
fn excerpt(text: &str) -> String {
    let lines: Vec<&str> = text.lines().take(6).collect();
    let mut s = lines
        .iter()
        .map(|l| format!("      {}", l.chars().take(300).collect::<String>()))
        .collect::<Vec<_>>()
        .join("\n");
    if text.lines().count() > lines.len() {
        s.push_str("\n      ...");
    }
    s
}

#[test]
fn every_adversarial_case_fails_cleanly_or_runs_as_expected() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adversarial/cases.toml");
    let text = std::fs::read_to_string(&path).expect("the corpus is readable");
    let corpus: Corpus = toml::from_str(&text).expect("the corpus parses");
    let mut names = std::collections::HashSet::new();
    for c in &corpus.case {
        assert!(
            names.insert(c.name.as_str()),
            "duplicate case name {}",
            c.name
        );
    }
    assert!(
        corpus.case.len() >= MIN_CASES,
        "the corpus has {} cases; keep at least {MIN_CASES}",
        corpus.case.len()
    );
    let filter = std::env::var("SMARTIO_CASES").unwrap_or_default();
    let cases: Vec<&Case> = corpus
        .case
        .iter()
        .filter(|c| c.name.contains(filter.as_str()))
        .collect();
    let root = std::env::temp_dir().join(format!("smartio-adversarial-{}", std::process::id()));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Ran>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                let dir = root.join(format!("{i:03}"));
                let (failure, elapsed, peak) = match run(case, &dir) {
                    Ok(o) => {
                        let why = judge(case, &dir, &o);
                        let report = (!why.is_empty()).then(|| {
                            format!(
                                "{} ({}): {}\n    smartio {}\n    exit {:?} after {:.1} s\n    stderr:\n{}\n    stdout:\n{}",
                                case.name,
                                case.class,
                                why.join("; "),
                                case.args.join(" "),
                                o.status.and_then(|s| s.code()),
                                o.elapsed.as_secs_f64(),
                                excerpt(&o.stderr),
                                excerpt(&o.stdout)
                            )
                        });
                        (report, o.elapsed, o.peak)
                    }
                    Err(e) => (
                        Some(format!("{} ({}): the case itself is broken: {e}", case.name, case.class)),
                        Duration::ZERO,
                        0,
                    ),
                };
                let _ = std::fs::remove_dir_all(&dir);
                if let Ok(mut r) = results.lock() {
                    r.push(Ran {
                        class: case.class.clone(),
                        name: case.name.clone(),
                        failure,
                        elapsed,
                        peak,
                    });
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&root);
    let results = results.into_inner().expect("no worker panicked");
    let mut per_class: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in &results {
        let e = per_class.entry(r.class.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(r.failure.is_none());
    }
    let total: Duration = results.iter().map(|r| r.elapsed).sum();
    let mut by_time: Vec<&Ran> = results.iter().collect();
    by_time.sort_by_key(|r| std::cmp::Reverse(r.elapsed));
    let slowest: Vec<String> = by_time
        .iter()
        .take(3)
        .map(|r| format!("{} {:.1} s", r.name, r.elapsed.as_secs_f64()))
        .collect();
    let largest = results
        .iter()
        .max_by_key(|r| r.peak)
        .map_or_else(String::new, |r| format!("{} {} MiB", r.name, r.peak >> 20));
    let mut summary = format!(
        "adversarial corpus: {} cases, {:.0} s of runs (slowest: {}; largest: {largest})\n",
        results.len(),
        total.as_secs_f64(),
        slowest.join(", ")
    );
    for (class, (n, ok)) in &per_class {
        summary.push_str(&format!("  {class:<22} {ok:>4} of {n:>4} pass\n"));
    }
    let failures: Vec<&String> = results.iter().filter_map(|r| r.failure.as_ref()).collect();
    eprintln!("{summary}");
    assert!(
        failures.is_empty(),
        "{summary}\n{} case(s) failed:\n\n{}",
        failures.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

/// The runner's own rule can fail: a case that grew past 2 GiB, or was killed by the
/// watchdog, without the budget's note fails; with the note it passes.
#[test]
fn the_corpus_runner_fails_a_case_that_grew_or_ran_on_without_saying_so() {
    let case = Case {
        name: "big".into(),
        class: "test".into(),
        args: vec![],
        expect: Expect::Ok,
        contains: vec![],
        absent: vec![],
        files: vec![],
        writes: vec![],
    };
    let outcome = |peak: u64, stderr: &str, timed_out: bool| Outcome {
        status: if timed_out {
            None
        } else {
            Command::new("true").status().ok()
        },
        timed_out,
        stdout: String::new(),
        stderr: stderr.into(),
        stray: vec![],
        elapsed: Duration::from_secs(1),
        peak,
    };
    let dir = Path::new("/nonexistent");
    let why = judge(&case, dir, &outcome(3 << 30, "", false));
    assert!(
        why.iter()
            .any(|w| w.contains("without having said so first")),
        "{why:?}"
    );
    let note = format!("{ANNOUNCED} fio: 3 GiB");
    assert!(judge(&case, dir, &outcome(3 << 30, &note, false)).is_empty());
    assert!(judge(&case, dir, &outcome(1 << 30, "", false)).is_empty());
    let why = judge(&case, dir, &outcome(0, "", true));
    assert!(why.iter().any(|w| w.starts_with("hung")), "{why:?}");
}
