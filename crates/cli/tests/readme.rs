//! Every example the README gives and every command the demo suggests runs and succeeds.
//!
//! Examples are collected from the README's `sh` code blocks (`smartio ...` and `cargo run
//! --release -- ...` lines) and from inline code spans that start with `smartio ` and are
//! concrete — no synopsis brackets (`[`, `|`, `<command>`) and no placeholder words in
//! capitals (`S`, `HOST`). The demo's suggestions are the inline code spans of its output that start with
//! `smartio `. Each runs the built binary under a time bound.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_smartio");
/// A generous bound for one example on a loaded 2-core machine (the longest take seconds).
const TIME_BOUND: Duration = Duration::from_secs(600);

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The arguments of a `smartio ...` or `cargo run --release -- ...` line, if it is one.
fn command_args(line: &str) -> Option<Vec<String>> {
    let line = line.trim().split(" #").next().unwrap_or("").trim();
    let rest = line
        .strip_prefix("smartio ")
        .or_else(|| line.strip_prefix("cargo run --release -- "))?;
    // A `\` alone is a shell line continuation (the demo wraps long commands so).
    Some(
        rest.split_whitespace()
            .filter(|w| *w != "\\")
            .map(str::to_string)
            .collect(),
    )
}

/// Whether an inline command is a concrete example rather than a synopsis.
fn concrete(args: &[String]) -> bool {
    let placeholder = |a: &String| {
        a.contains(['[', '|', '<'])
            || a.contains("...")
            || (a.len() <= 8 && a.chars().all(|c| c.is_ascii_uppercase()))
    };
    !args.iter().any(placeholder)
}

/// Inline code spans (`...`) of `text`.
fn code_spans(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        if after.starts_with("``") {
            // A fence: skip to its end.
            rest = after.find("\n```").map_or("", |end| &after[end + 4..]);
            continue;
        }
        let Some(end) = after.find('`') else { break };
        spans.push(after[..end].replace('\n', " "));
        rest = &after[end + 1..];
    }
    spans
}

/// The README's examples, in order, without duplicates.
fn readme_examples(text: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut in_sh = false;
    let mut first = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && (t == "```sh" || t == "```bash");
            first = true;
            continue;
        }
        // A script whose first line says which test runs it (a server and its clients
        // together) is that test's business; `scripts_are_run_by_the_tests_they_name`
        // checks the test exists and names the script.
        if in_sh && first && script_runner(t).is_some() {
            in_sh = false;
            continue;
        }
        first = false;
        if in_sh {
            if let Some(args) = command_args(t) {
                out.push(args);
            }
        }
    }
    for span in code_spans(text) {
        if let Some(args) = command_args(&span) {
            if concrete(&args) {
                out.push(args);
            }
        }
    }
    let mut seen = Vec::new();
    out.retain(|a| {
        let fresh = !seen.contains(a);
        if fresh {
            seen.push(a.clone());
        }
        fresh
    });
    out
}

/// For a script's first line `# MARKER (run by crates/cli/tests/FILE.rs)`: the marker and
/// the test file.
fn script_runner(first_line: &str) -> Option<(&str, &str)> {
    let rest = first_line.strip_prefix("# ")?;
    let (marker, runner) = rest.split_once(" (run by ")?;
    Some((marker, runner.strip_suffix(')')?))
}

#[test]
fn scripts_are_run_by_the_tests_they_name() {
    let text = readme();
    let scripts: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| script_runner(l.trim()))
        .collect();
    assert!(scripts.len() >= 2, "the README's NBD scripts are marked");
    for (marker, runner) in scripts {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(runner);
        let test = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{runner}: {e}"));
        assert!(
            test.contains(&format!("readme_script(\"# {marker}")),
            "{runner} does not run the README's script {marker:?}"
        );
    }
}

struct Outcome {
    ok: bool,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs the binary with `args` in a fresh temporary directory (so examples that write files
/// leave nothing behind), killing it past the time bound.
fn run(args: &[String]) -> Outcome {
    let dir = std::env::temp_dir().join(format!(
        "smartio-readme-{}-{}",
        std::process::id(),
        args.join("_")
            .replace(['/', ' '], "_")
            .chars()
            .take(80)
            .collect::<String>()
    ));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the smartio binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if start.elapsed() > TIME_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = out.join().unwrap_or_default();
    let mut stderr = err.join().unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!("\n(killed after {TIME_BOUND:?})"));
    }
    Outcome {
        ok: status.is_some_and(|s| s.success()),
        stdout,
        stderr,
        took: start.elapsed(),
    }
}

/// Runs every command, two at a time, and fails with all the failures at once.
fn run_all(what: &str, commands: Vec<Vec<String>>) {
    assert!(!commands.is_empty(), "no {what} found");
    let queue = std::sync::Mutex::new(commands.into_iter());
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                let Some(args) = next else { break };
                let o = run(&args);
                eprintln!(
                    "{what}: smartio {} ({:.1} s)",
                    args.join(" "),
                    o.took.as_secs_f64()
                );
                // Text output fits 100 columns (a suggested command is continued shell-style).
                let wide: Vec<&str> = if args.iter().any(|a| a == "--json") {
                    Vec::new()
                } else {
                    o.stdout
                        .lines()
                        .filter(|l| l.chars().count() > 100)
                        .collect()
                };
                if !wide.is_empty() {
                    if let Ok(mut f) = failures.lock() {
                        f.push(format!(
                            "smartio {}: {} lines over 100 columns, e.g.\n  {}",
                            args.join(" "),
                            wide.len(),
                            wide[0]
                        ));
                    }
                }
                if !o.ok || o.stdout.trim().is_empty() {
                    if let Ok(mut f) = failures.lock() {
                        f.push(format!(
                            "smartio {}\n  stdout: {}\n  stderr: {}",
                            args.join(" "),
                            o.stdout
                                .lines()
                                .take(5)
                                .collect::<Vec<_>>()
                                .join("\n          "),
                            o.stderr.trim()
                        ));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_default();
    assert!(
        failures.is_empty(),
        "{} {what} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_readme_example_runs_and_succeeds() {
    let examples = readme_examples(&readme());
    assert!(
        examples
            .iter()
            .any(|a| a.first().is_some_and(|c| c == "demo")),
        "the quick start's demo is among the examples: {examples:?}"
    );
    run_all("README example", examples);
}

#[test]
fn every_command_the_demo_suggests_runs_and_succeeds() {
    let demo = run(&["demo".to_string()]);
    assert!(demo.ok, "the demo fails: {}", demo.stderr);
    let suggested: Vec<Vec<String>> = code_spans(&demo.stdout)
        .iter()
        .filter_map(|s| command_args(s))
        .filter(|a| concrete(a))
        .collect();
    assert!(
        suggested.len() >= 3,
        "the demo suggests commands to try next: {suggested:?}"
    );
    run_all("demo suggestion", suggested);
}

#[test]
fn examples_are_found_in_sh_blocks_and_concrete_inline_spans_only() {
    let text = "intro `smartio fio --scenario S --host H` and `smartio topo --scenario back-to-back`\n\
                ```text\nsmartio scenarios\n```\n```sh\nsmartio devices --scenario cluster-switch  # list\n\
                cargo run --release -- demo\ncargo test --workspace --release\n```\n\
                and `smartio bench dma [--json]`, `smartio <command>`.";
    let found = readme_examples(text);
    let expect: Vec<Vec<String>> = [
        "devices --scenario cluster-switch",
        "demo",
        "topo --scenario back-to-back",
    ]
    .iter()
    .map(|s| s.split_whitespace().map(str::to_string).collect())
    .collect();
    assert_eq!(found, expect);
}

/// The quick start's `cargo run --release -- demo` must pick this binary out of the
/// workspace (a second binary once made `cargo run` refuse to choose). Run through cargo
/// itself, in the profile this test was built in (the directory its binary is in:
/// `target/<profile>`, the dev profile's `debug`), so nothing new is compiled.
#[test]
fn cargo_run_at_the_top_of_the_workspace_runs_smartio() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let profile = std::path::Path::new(env!("CARGO_BIN_EXE_smartio"))
        .parent()
        .and_then(std::path::Path::file_name)
        .and_then(std::ffi::OsStr::to_str)
        .map(|dir| if dir == "debug" { "dev" } else { dir })
        .expect("the binary's profile directory");
    let mut args = vec!["run", "--quiet", "--profile", profile];
    args.extend(["--", "--version"]);
    let out = std::process::Command::new(cargo)
        .args(&args)
        .current_dir(&top)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("smartio "),
        "cargo {} failed: {}{}",
        args.join(" "),
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The subcommands `smartio --help` lists (without `help`), each with the subcommands (or,
/// for `exp`, the experiments) its own help lists: `["bench", "dma"]`, `["demo"]`, ...
fn subcommands() -> Vec<Vec<String>> {
    let listed = |args: &[&str]| -> Vec<String> {
        let out = Command::new(BIN)
            .args(args)
            .arg("--help")
            .output()
            .expect("smartio runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(rest) = text.split("\nCommands:\n").nth(1) {
            return rest
                .lines()
                .take_while(|l| l.starts_with("  "))
                // A name is indented two spaces; its wrapped description, more.
                .filter(|l| !l.starts_with("   "))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|name| *name != "help")
                .map(str::to_string)
                .collect();
        }
        // A command whose argument names what to run (`exp NAME`): its possible values.
        let arguments = text
            .split("\nArguments:\n")
            .nth(1)
            .and_then(|rest| rest.split("\nOptions:\n").next())
            .unwrap_or("");
        arguments
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("- "))
            .filter_map(|l| l.split(':').next())
            .map(str::to_string)
            .collect()
    };
    let mut all = Vec::new();
    for command in listed(&[]) {
        let subs = listed(&[&command]);
        if subs.is_empty() {
            all.push(vec![command]);
            continue;
        }
        for sub in subs {
            all.push(vec![command.clone(), sub]);
        }
    }
    all
}

/// The README's command list (the `text` block under "## Commands") as the names it gives
/// each command: a line `smartio exp a|b|` continued by `c|d [--x]` gives `exp a` to `exp d`.
fn readme_command_list(readme: &str) -> Vec<Vec<String>> {
    let block = readme
        .split("## Commands")
        .nth(1)
        .and_then(|s| s.split("```text\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the README's command list");
    let mut joined = String::new();
    for line in block.lines() {
        if line.starts_with("smartio ") {
            joined.push('\n');
        } else if !joined.ends_with('|') {
            continue;
        }
        joined.push_str(line.trim());
    }
    let mut names = Vec::new();
    for line in joined.lines().filter(|l| !l.is_empty()) {
        let mut words = line.split_whitespace().skip(1);
        let Some(command) = words.next() else {
            continue;
        };
        match words
            .next()
            .filter(|w| !w.starts_with('-') && !w.starts_with('['))
        {
            Some(subs) => {
                for sub in subs.split('|') {
                    names.push(vec![command.to_string(), sub.to_string()]);
                }
            }
            None => names.push(vec![command.to_string()]),
        }
    }
    names
}

#[test]
fn the_readmes_command_list_gives_every_subcommand_and_nothing_else() {
    let commands = subcommands();
    assert!(commands.len() > 20, "{commands:?}");
    let listed = readme_command_list(&readme());
    let missing: Vec<String> = commands
        .iter()
        .filter(|c| !listed.contains(c))
        .map(|c| c.join(" "))
        .collect();
    assert!(
        missing.is_empty(),
        "the README's command list misses: {missing:?}"
    );
    let unknown: Vec<String> = listed
        .iter()
        .filter(|c| !commands.contains(c))
        .map(|c| c.join(" "))
        .collect();
    assert!(
        unknown.is_empty(),
        "the README lists commands smartio does not have: {unknown:?}"
    );
}

/// Every relative link of the README and of `docs/` names a file of the repository.
#[test]
fn the_docs_link_only_to_files_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository");
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        for link in text.split("](").skip(1) {
            let target = link.split(')').next().unwrap_or("");
            let file = target.split('#').next().unwrap_or("");
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            let dir = page.parent().expect("a page's directory");
            let resolved = dir.join(file).canonicalize();
            assert!(
                resolved.as_ref().is_ok_and(|p| p.starts_with(&root)),
                "{}: the link {target} is not a file of the repository",
                page.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 3, "only {checked} links found");
}
