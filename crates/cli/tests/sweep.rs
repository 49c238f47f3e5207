//! `smartio sweep`: a grid's runs in parallel, one JSON line each; the README's Slurm job
//! array and Kubernetes Indexed Job run as documented (every index, then the merge) give the
//! unsharded sweep's lines byte for byte.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_smartio");

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smartio-sweep-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temporary directory");
    d
}

/// Runs `smartio` with the words of `line` in `cwd`; panics with its stderr if it fails.
fn smartio(cwd: &Path, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"smartio"), "{line}");
    let out = Command::new(BIN)
        .args(&words[1..])
        .current_dir(cwd)
        .output()
        .expect("the smartio binary starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{line}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The fenced block of `lang` that contains `marker`.
fn block<'a>(text: &'a str, lang: &str, marker: &str) -> &'a str {
    let fence = format!("```{lang}\n");
    text.match_indices(&fence)
        .map(|(i, _)| {
            let body = &text[i + fence.len()..];
            &body[..body.find("```").unwrap_or(body.len())]
        })
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("no {lang} block with {marker:?} in the README"))
}

/// The unsharded sweep's lines, as the README's first example writes them (run once for all
/// the tests).
fn whole() -> &'static str {
    static WHOLE: OnceLock<String> = OnceLock::new();
    WHOLE.get_or_init(|| {
        let d = dir("whole-shared");
        smartio(&d, "smartio sweep run qd1-seeds --out qd1.jsonl");
        let text = std::fs::read_to_string(d.join("qd1.jsonl")).expect("written");
        let _ = std::fs::remove_dir_all(&d);
        text
    })
}

#[test]
fn the_whole_sweep_is_one_line_per_run_in_the_grids_order() {
    let d = dir("whole");
    let table = smartio(&d, "smartio sweep run qd1-seeds --out qd1.jsonl --jobs 2");
    let text = std::fs::read_to_string(d.join("qd1.jsonl")).expect("written");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 24);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["sweep"], "qd1-seeds");
        assert_eq!(l["index"], i);
        assert_eq!(l["runs"], 24);
        // Seeds vary fastest, scenarios slowest (keys sorted by name, the last fastest).
        let scenario = if i < 12 {
            "back-to-back"
        } else {
            "cluster-switch"
        };
        assert_eq!(l["params"]["scenario"], scenario, "{l}");
        assert_eq!(l["params"]["seed"], (i % 12 + 1) as u64, "{l}");
        assert_eq!(
            l["argv"].as_array().and_then(|a| a.last()),
            Some(&"--json".into())
        );
        // The result is fio's own JSON: 20000 reads, every one of them timed.
        assert_eq!(l["result"]["reads"], 20000, "{l}");
        let p50 = l["result"]["lat_ns"]["p50"].as_f64().expect("a median");
        assert!((5_000.0..50_000.0).contains(&p50), "{p50}");
    }
    // The table shows the metric of every run.
    assert!(
        table.contains("/lat_ns/p50") && table.contains("cluster-switch"),
        "{table}"
    );
    assert_eq!(
        table.lines().filter(|l| l.contains("back-to-back")).count(),
        12
    );
    // The same sweep again gives the same bytes.
    assert_eq!(
        whole(),
        text,
        "the same sweep on one worker per core: the same bytes"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_readmes_slurm_job_array_merged_equals_the_whole_sweep() {
    let text = readme();
    let script = block(&text, "bash", "#SBATCH --array=0-2");
    let d = dir("slurm");
    for task in 0..3 {
        for line in script
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("srun smartio "))
        {
            let line = line
                .trim_start_matches("srun ")
                .replace("$SLURM_ARRAY_TASK_ID", &task.to_string())
                .replace("$SLURM_ARRAY_TASK_COUNT", "3");
            smartio(&d, &line);
        }
    }
    let merge = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("# after the array: srun "))
        .expect("the merge line");
    smartio(&d, merge);
    let merged = std::fs::read_to_string(d.join("qd1.jsonl")).expect("merged");
    assert_eq!(
        merged,
        whole(),
        "three shards merged = the whole sweep, byte for byte"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_readmes_kubernetes_indexed_job_merged_equals_the_whole_sweep() {
    let text = readme();
    let job = block(&text, "yaml", "completionMode: Indexed");
    assert!(job.contains("completions: 3"), "{job}");
    let d = dir("k8s");
    let results = d.join("results");
    std::fs::create_dir_all(&results).expect("the shared volume");
    let shard = job
        .lines()
        .find_map(|l| l.trim().strip_prefix("args: [\""))
        .and_then(|l| l.strip_suffix("\"]"))
        .expect("the container's command line");
    for index in 0..3 {
        let line = shard
            .replace("$JOB_COMPLETION_INDEX", &index.to_string())
            .replace("/results", results.to_str().expect("utf-8"));
        smartio(&d, &line);
    }
    let merge = job
        .lines()
        .find_map(|l| l.trim().strip_prefix("# then: "))
        .expect("the merge line")
        .replace("/results", results.to_str().expect("utf-8"));
    let merged = smartio(&d, &merge);
    assert_eq!(
        merged,
        whole(),
        "three pods merged = the whole sweep, byte for byte"
    );
    let _ = std::fs::remove_dir_all(&d);
}
