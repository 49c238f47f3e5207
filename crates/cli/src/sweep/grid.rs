//! A sweep's grid: one measuring command, the options every run shares (`[fixed]`) and the
//! options that vary (`[vary]`, a list of values each), expanded into runs in a fixed order:
//! `[vary]`'s keys sorted by name, the last one varying fastest. Every run's command line is
//! checked by the same parser the command line uses before anything runs.
//!
//! ```toml
//! command = ["fio"]
//! metric = "/lat_ns/p50"        # optional: a JSON pointer into each run's result
//! [fixed]
//! host = "borrower"
//! device = "lender:nvme0"
//! ops = 2000
//! [vary]
//! scenario = ["back-to-back", "cluster-switch"]
//! seed = [1, 2, 3]
//! ```

use super::error::GridError;
use crate::args::Cli;
use clap::Parser;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Most runs one grid may expand to (a sweep keeps one line per run in memory).
pub const MAX_RUNS: usize = 100_000;

/// The commands a sweep runs: those that print their measurement as JSON with `--json`.
pub const COMMANDS: [&str; 8] = [
    "fio", "pingpong", "iperf", "bench", "exp", "app", "topo", "devices",
];

/// Options a grid may not give, as a key or among its `command` words: the sweep adds
/// `--json` itself, and options that write files would have every run write the same file.
const RESERVED: [&str; 7] = [
    "json",
    "plots",
    "html",
    "backing",
    "help",
    "version",
    "no-budget",
];

/// Why a [`RESERVED`] option is refused.
const RESERVED_WHY: &str = "a sweep sets --json itself, refuses options that write files or \
     print help, and lets its runs over the budget only as a whole (smartio sweep run \
     --no-budget)";

/// Shipped grids: `sweeps/*.toml`, by name.
pub const SHIPPED: [(&str, &str); 1] = [(
    "qd1-seeds",
    include_str!("../../../../sweeps/qd1-seeds.toml"),
)];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrid {
    command: Vec<String>,
    metric: Option<String>,
    #[serde(default)]
    fixed: toml::Table,
    #[serde(default)]
    vary: toml::Table,
}

/// One option value: what follows `--key` (with the value as the grid wrote it, for the
/// run's `params`), or a flag (given when `true`, left out when `false`).
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Text(String, serde_json::Value),
    Flag(bool),
}

/// A grid value that is no option's value (an array, a table, a date).
#[derive(Debug, thiserror::Error)]
#[error("{value} is not a string, a number or true/false (an option's value)")]
struct NotAValue {
    /// As the grid wrote it.
    value: toml::Value,
}

impl Value {
    fn of(v: &toml::Value) -> Result<Value, NotAValue> {
        match v {
            toml::Value::String(s) => Ok(Value::Text(s.clone(), s.clone().into())),
            toml::Value::Integer(i) => Ok(Value::Text(i.to_string(), (*i).into())),
            toml::Value::Float(f) if f.is_finite() => Ok(Value::Text(f.to_string(), (*f).into())),
            toml::Value::Boolean(b) => Ok(Value::Flag(*b)),
            other => Err(NotAValue {
                value: other.clone(),
            }),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Value::Text(_, json) => json.clone(),
            Value::Flag(b) => serde_json::Value::Bool(*b),
        }
    }
}

/// An expanded grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Its name: the shipped grid's, or the file's stem.
    pub name: String,
    /// What the summary shows of each run's result.
    pub metric: Option<String>,
    /// The varied keys, in expansion order.
    pub keys: Vec<String>,
    /// Every run, by index.
    pub runs: Vec<Run>,
}

/// One run of a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Its place in the grid (0-based).
    pub index: usize,
    /// The varied options' values, by key.
    pub params: BTreeMap<String, serde_json::Value>,
    /// Its `smartio` arguments (without the program name), `--json` last.
    pub argv: Vec<String>,
}

impl Run {
    /// `key=value` pairs of the varied options, for messages and tables.
    pub fn described(&self) -> String {
        let pairs: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect();
        if pairs.is_empty() {
            "no varied options".into()
        } else {
            pairs.join(" ")
        }
    }
}

/// Reads the grid `file` (a path, or a shipped grid's name), expands it and checks every
/// run's command line. `calibration` (the sweep's own `--calibration`) is passed to every run
/// that does not set one.
pub fn load(file: &str, calibration: Option<&str>) -> Result<Grid, GridError> {
    let (name, text) = match std::fs::read_to_string(file) {
        Ok(text) => (stem(file), text),
        Err(e) => match SHIPPED.iter().find(|(n, _)| *n == file) {
            Some((n, text)) => (n.to_string(), text.to_string()),
            None => {
                return Err(GridError::Missing {
                    file: file.into(),
                    nearest: smartio_cluster::scenarios::nearest(file, SHIPPED.map(|(n, _)| n)),
                    shipped: SHIPPED.map(|(n, _)| n).join(", "),
                    why: e.to_string(),
                })
            }
        },
    };
    parse(&name, file, &text, calibration)
}

fn stem(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map_or_else(|| file.to_string(), |s| s.to_string_lossy().into_owned())
}

/// [`load`] on text already read; `file` names it in messages.
pub fn parse(
    name: &str,
    file: &str,
    text: &str,
    calibration: Option<&str>,
) -> Result<Grid, GridError> {
    let raw: RawGrid = toml::from_str(text).map_err(|e| GridError::Toml {
        file: file.into(),
        message: e.to_string().trim_end().replace('\n', " "),
    })?;
    check_command(file, &raw)?;
    let fixed = fixed(file, &raw)?;
    let (vary, total) = vary(file, &raw)?;
    let mut runs = Vec::with_capacity(total);
    for index in 0..total {
        runs.push(run_at(file, &raw, &fixed, &vary, index, calibration)?);
    }
    Ok(Grid {
        name: name.into(),
        metric: raw.metric,
        keys: vary.into_iter().map(|(k, _)| k).collect(),
        runs,
    })
}

/// Refuses a command that is not one of [`COMMANDS`] or that gives an option the sweep
/// sets itself, and a metric that is not a JSON pointer.
fn check_command(file: &str, raw: &RawGrid) -> Result<(), GridError> {
    let allowed = COMMANDS.join(", ");
    let first = raw.command.first().ok_or_else(|| GridError::NoCommand {
        file: file.into(),
        allowed: allowed.clone(),
    })?;
    if !COMMANDS.contains(&first.as_str()) {
        return Err(GridError::Command {
            file: file.into(),
            command: raw.command.join(" "),
            allowed,
        });
    }
    if let Some(word) = raw.command.iter().find(|w| {
        RESERVED.iter().any(|r| {
            w.strip_prefix("--")
                .is_some_and(|o| o == *r || o.starts_with(&format!("{r}=")))
        })
    }) {
        return Err(GridError::Key {
            file: file.into(),
            section: "command",
            key: word.clone(),
            why: RESERVED_WHY.into(),
        });
    }
    if let Some(m) = &raw.metric {
        if !m.starts_with('/') {
            return Err(GridError::Metric {
                file: file.into(),
                metric: m.clone(),
            });
        }
    }
    Ok(())
}

/// A refusal of `key` of `section`, saying why.
fn key_error(file: &str, section: &'static str, key: &str, why: String) -> GridError {
    GridError::Key {
        file: file.into(),
        section,
        key: key.into(),
        why,
    }
}

/// Refuses a key that is not an option name, or one the sweep sets itself.
fn check_key(file: &str, section: &'static str, key: &str) -> Result<(), GridError> {
    let well_formed = key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !well_formed {
        return Err(key_error(
            file,
            section,
            key,
            "an option name is lower-case letters, digits, '-' and '_' (e.g. ops, device-a)".into(),
        ));
    }
    if RESERVED.contains(&key) {
        return Err(key_error(file, section, key, RESERVED_WHY.into()));
    }
    Ok(())
}

/// The options every run gives, checked.
fn fixed(file: &str, raw: &RawGrid) -> Result<Vec<(String, Value)>, GridError> {
    let mut fixed = Vec::new();
    for (key, v) in &raw.fixed {
        check_key(file, "fixed", key)?;
        let value = Value::of(v).map_err(|why| key_error(file, "fixed", key, why.to_string()))?;
        fixed.push((key.clone(), value));
    }
    Ok(fixed)
}

/// A varied option and its values.
type Varied = (String, Vec<Value>);

/// The options the runs vary, each with its values, checked; and how many runs they make.
fn vary(file: &str, raw: &RawGrid) -> Result<(Vec<Varied>, usize), GridError> {
    let mut vary = Vec::new();
    let mut total: usize = 1;
    for (key, v) in &raw.vary {
        check_key(file, "vary", key)?;
        if raw.fixed.contains_key(key) {
            return Err(key_error(
                file,
                "vary",
                key,
                "is in [fixed] too; an option is either fixed or varied".into(),
            ));
        }
        let toml::Value::Array(items) = v else {
            return Err(key_error(
                file,
                "vary",
                key,
                format!("{v} is not a list of values (write [{v}] for one)"),
            ));
        };
        if items.is_empty() {
            return Err(key_error(
                file,
                "vary",
                key,
                "an empty list gives no run".into(),
            ));
        }
        let values = items
            .iter()
            .map(Value::of)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| key_error(file, "vary", key, why.to_string()))?;
        total = total
            .checked_mul(values.len())
            .filter(|&t| t <= MAX_RUNS)
            .ok_or(GridError::TooManyRuns {
                file: file.into(),
                max: MAX_RUNS,
            })?;
        vary.push((key.clone(), values));
    }
    Ok((vary, total))
}

/// Run `index` of the grid: its values of the varied options (mixed radix, the last key
/// fastest), its command line, checked as `smartio` would parse it.
fn run_at(
    file: &str,
    raw: &RawGrid,
    fixed: &[(String, Value)],
    vary: &[Varied],
    index: usize,
    calibration: Option<&str>,
) -> Result<Run, GridError> {
    // Mixed radix, the last key fastest.
    let mut rest = index;
    let mut picked = vec![0; vary.len()];
    for (slot, (_, values)) in picked.iter_mut().zip(vary).rev() {
        *slot = rest % values.len();
        rest /= values.len();
    }
    let mut argv = raw.command.clone();
    let mut params = BTreeMap::new();
    let chosen = vary
        .iter()
        .zip(&picked)
        .map(|((k, values), &i)| (k, &values[i]));
    for (key, value) in fixed.iter().map(|(k, v)| (k, v)).chain(chosen.clone()) {
        push_option(&mut argv, key, value);
    }
    for (key, value) in chosen {
        params.insert(key.clone(), value.json());
    }
    if let Some(c) = calibration {
        if !raw.fixed.contains_key("calibration") && !raw.vary.contains_key("calibration") {
            argv.push("--calibration".into());
            argv.push(c.into());
        }
    }
    argv.push("--json".into());
    let run = Run {
        index,
        params,
        argv,
    };
    check_run(&run).map_err(|e| GridError::Run {
        file: file.into(),
        index,
        params: run.described(),
        why: first_error_line(&e),
    })?;
    Ok(run)
}

fn push_option(argv: &mut Vec<String>, key: &str, value: &Value) {
    let option = format!("--{}", key.replace('_', "-"));
    match value {
        Value::Text(s, _) => {
            argv.push(option);
            argv.push(s.clone());
        }
        Value::Flag(true) => argv.push(option),
        Value::Flag(false) => {}
    }
}

/// Parses a run's command line as `smartio` would (its first word is one of [`COMMANDS`]).
fn check_run(run: &Run) -> Result<(), clap::Error> {
    Cli::try_parse_from(std::iter::once("smartio".to_string()).chain(run.argv.clone())).map(|_| ())
}

/// The line of clap's message that says what is wrong (without `error: `).
fn first_error_line(e: &clap::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or(text.trim())
        .trim_start_matches("error: ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRID: &str = r#"
command = ["fio"]
[fixed]
host = "borrower"
device = "lender:nvme0"
ops = 100
[vary]
scenario = ["back-to-back", "cluster-switch"]
seed = [1, 2, 3]
"#;

    #[test]
    fn runs_are_numbered_with_the_last_key_fastest_and_end_with_json() {
        let g = parse("g", "g.toml", GRID, None).expect("valid");
        assert_eq!(g.runs.len(), 6);
        assert_eq!(g.keys, ["scenario", "seed"]);
        assert_eq!(g.runs[1].described(), "scenario=back-to-back seed=2");
        assert_eq!(g.runs[3].described(), "scenario=cluster-switch seed=1");
        assert_eq!(
            g.runs[3].argv,
            [
                "fio",
                "--device",
                "lender:nvme0",
                "--host",
                "borrower",
                "--ops",
                "100",
                "--scenario",
                "cluster-switch",
                "--seed",
                "1",
                "--json"
            ]
        );
    }

    #[test]
    fn the_sweeps_calibration_reaches_every_run_that_sets_none() {
        let g = parse("g", "g.toml", GRID, Some("my.toml")).expect("valid");
        assert!(g.runs.iter().all(|r| r
            .argv
            .windows(2)
            .any(|w| w[0] == "--calibration" && w[1] == "my.toml")));
    }

    #[test]
    fn bad_grids_are_refused_with_the_key_and_the_reason() {
        let err = |text: &str| {
            parse("g", "g.toml", text, None)
                .expect_err("refused")
                .to_string()
        };
        assert!(err("command = []").contains("names no command"));
        assert!(err("command = [\"demo\"]").contains("prints no JSON"));
        let e = err("command = [\"fio\"]\n[vary]\nseed = []");
        assert!(e.contains("vary.seed: an empty list gives no run"), "{e}");
        let e = err("command = [\"fio\"]\n[vary]\nseed = 3");
        assert!(e.contains("vary.seed: 3 is not a list"), "{e}");
        let e = err("command = [\"exp\", \"multicast\", \"--plots=d\"]");
        assert!(
            e.contains("command.--plots=d") && e.contains("write files"),
            "{e}"
        );
        let e = err("command = [\"fio\"]\n[fixed]\nbacking = \"x.img\"");
        assert!(
            e.contains("fixed.backing") && e.contains("write files"),
            "{e}"
        );
        let e = err("command = [\"fio\"]\n[fixed]\nplots = \"d\"");
        assert!(
            e.contains("fixed.plots") && e.contains("write files"),
            "{e}"
        );
        let e = err("command = [\"fio\"]\n[fixed]\nseed = 1\n[vary]\nseed = [2]");
        assert!(e.contains("vary.seed: is in [fixed] too"), "{e}");
        let e = err("command = [\"fio\"]\nmetric = \"lat\"");
        assert!(e.contains("not a JSON pointer"), "{e}");
        let e = err("command = [\"fio\"]\n[vary]\na = [1,2,3,4,5,6,7,8,9,10]\nb = [1,2,3,4,5,6,7,8,9,10]\nc = [1,2,3,4,5,6,7,8,9,10]\nd = [1,2,3,4,5,6,7,8,9,10]\ne = [1,2,3,4,5,6,7,8,9,10]\nf = [1,2]");
        assert!(e.contains("more than 100000 runs"), "{e}");
        // The command line of a run is checked as smartio checks it.
        let e = err(&GRID.replace("ops = 100", "ops = 0"));
        assert!(
            e.starts_with("g.toml: run 0 (scenario=back-to-back seed=1): ") && e.contains("--ops"),
            "{e}"
        );
        let e = err(&GRID.replace("ops = 100", "opps = 100"));
        assert!(e.contains("run 0") && e.contains("--opps"), "{e}");
        assert!(err("command = 3").starts_with("g.toml: "));
    }

    #[test]
    fn the_shipped_grids_expand() {
        for (name, text) in SHIPPED {
            let g = parse(name, name, text, None).expect("a shipped grid is valid");
            assert!(g.runs.len() >= 24, "{name}: {} runs", g.runs.len());
        }
    }
}
