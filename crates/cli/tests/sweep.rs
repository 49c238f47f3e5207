//! `smartio sweep`: a grid's runs in parallel, one JSON line each; the README's Slurm job
//! array (submitted to a one-node cluster the test starts) and Kubernetes Indexed Job (its
//! manifest checked, each index's command run) give, merged, the unsharded sweep's lines byte
//! for byte. The Slurm test needs root, Slurm and munge; it says SKIPPED without them, except
//! where CI requires it (`SMARTIO_REQUIRE_SLURM`): there it fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

#[path = "sweep/slurm.rs"]
mod slurm;

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

/// `PATH` with the directory of the `smartio` just built first: the README's `smartio`.
fn path_with_smartio() -> String {
    let bin_dir = Path::new(BIN).parent().expect("the binary's directory");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(bin_dir.to_path_buf()).chain(std::env::split_paths(&path));
    let joined = std::env::join_paths(dirs).expect("PATH's directories join");
    joined.into_string().expect("a UTF-8 PATH")
}

/// The fenced block of `lang` that contains `marker`, without the indentation of its fence
/// (a block in a list item is indented; a script's `#!` and `#SBATCH` must start their lines).
fn block(text: &str, lang: &str, marker: &str) -> String {
    let fence = format!("```{lang}\n");
    text.match_indices(&fence)
        .map(|(i, _)| {
            let line_start = text[..i].rfind('\n').map_or(0, |n| n + 1);
            let indent = &text[line_start..i];
            let body = &text[i + fence.len()..];
            let body = &body[..body.find("```").unwrap_or(body.len())];
            body.lines()
                .map(|l| l.strip_prefix(indent).unwrap_or(l))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
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
        table.contains("/lat_ns/mean") && table.contains("cluster-switch"),
        "{table}"
    );
    // The seed visibly changes what the table shows: the mean is exact (the medians of
    // twelve seeds fall in one or two 8 ns buckets of the percentile histogram).
    let means: std::collections::BTreeSet<String> = table
        .lines()
        .filter(|l| l.contains("back-to-back"))
        .filter_map(|l| l.split('┆').nth(3).map(|c| c.trim().to_string()))
        .collect();
    assert!(means.len() >= 10, "the seeds' means: {means:?}\n{table}");
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
fn the_readmes_slurm_job_array_on_a_real_cluster_merged_equals_the_whole_sweep() {
    if let Some(why) = slurm::unavailable() {
        assert!(
            std::env::var_os("SMARTIO_REQUIRE_SLURM").is_none(),
            "the Slurm job array test: {why}"
        );
        eprintln!("SKIPPED: the Slurm job array test: {why}");
        return;
    }
    let text = readme();
    let script = block(&text, "bash", "#SBATCH --array=");
    let merge = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("# after the array: "))
        .expect("the merge line");
    let shards = merge
        .split_whitespace()
        .filter(|w| w.starts_with("part-"))
        .count();
    let d = dir("slurm");
    let cluster = slurm::Cluster::start(&d.join("cluster"));
    let work = d.join("work");
    std::fs::create_dir_all(&work).expect("the submit directory");
    std::fs::write(work.join("sweep.sbatch"), &script).expect("the job script");
    let path = path_with_smartio();

    let id = cluster.sbatch(&work, "sweep.sbatch", &path);
    let tasks = cluster.wait(&id, Duration::from_secs(300));
    assert_eq!(tasks.len(), shards, "one task per part the merge reads");
    for task in &tasks {
        assert!(
            task.contains("JobState=COMPLETED") && task.contains("ExitCode=0:0"),
            "{task}\n{}",
            slurm::job_outputs(&work)
        );
    }
    // The merge as the README's comment runs it: with srun, in the submit directory.
    let words: Vec<&str> = merge.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"srun"), "{merge}");
    cluster.srun(&work, &words[1..], &path);
    let merged = std::fs::read_to_string(work.join("qd1.jsonl")).expect("merged");
    assert_eq!(
        merged,
        whole(),
        "the array's {shards} tasks merged = the whole sweep, byte for byte"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&d);
}

/// What a pod of the README's Indexed Job runs, and where.
struct IndexedJob {
    completions: u64,
    /// The container runs `shell -c command`...
    shell: String,
    command: String,
    /// ... which writes its part (`out`, with `$JOB_COMPLETION_INDEX` in it) to the volume
    /// mounted at `mount_path`.
    out: String,
    mount_path: String,
}

/// The manifest parsed, checked for what the Job API requires of an Indexed Job whose pods
/// each run their own shard onto a shared volume.
fn indexed_job(manifest: &str) -> IndexedJob {
    let job: serde_json::Value =
        serde_yaml_ng::from_str(manifest).expect("the README's manifest is YAML");
    assert_eq!(job["apiVersion"], "batch/v1", "{job}");
    assert_eq!(job["kind"], "Job", "{job}");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed", "{spec}");
    let completions = spec["completions"].as_u64().expect("spec.completions");
    let pod = &spec["template"]["spec"];
    assert!(
        matches!(pod["restartPolicy"].as_str(), Some("Never" | "OnFailure")),
        "a Job's pods restart Never or OnFailure: {pod}"
    );
    let containers = pod["containers"].as_array().expect("the pod's containers");
    assert_eq!(containers.len(), 1, "{pod}");
    let container = &containers[0];
    let argv: Vec<&str> = [&container["command"], &container["args"]]
        .iter()
        .flat_map(|v| v.as_array().expect("command and args are lists"))
        .map(|w| w.as_str().expect("a word"))
        .collect();
    let [shell, "-c", command] = argv[..] else {
        panic!("the container runs one shell command: {argv:?}");
    };
    let words: Vec<&str> = command.split_whitespace().collect();
    let after = |flag: &str| {
        let at = words.iter().position(|w| *w == flag);
        at.and_then(|i| words.get(i + 1).copied())
            .unwrap_or_else(|| panic!("{flag} in {command:?}"))
    };
    // Each pod runs its own shard: the index Kubernetes gives it, of `completions`...
    assert_eq!(
        after("--shard"),
        format!("$JOB_COMPLETION_INDEX/{completions}")
    );
    // ... onto a volume the pod mounts.
    let out = after("--out");
    assert!(
        out.contains("$JOB_COMPLETION_INDEX"),
        "one part per pod: {out}"
    );
    let mount = container["volumeMounts"]
        .as_array()
        .expect("the container's volumeMounts")
        .iter()
        .find(|m| m["mountPath"].as_str().is_some_and(|p| out.starts_with(p)))
        .unwrap_or_else(|| panic!("{out} is on no mounted volume: {container}"));
    let volumes = pod["volumes"].as_array().expect("the pod's volumes");
    assert!(
        volumes.iter().any(|v| v["name"] == mount["name"]),
        "{mount} mounts a volume the pod defines: {pod}"
    );
    IndexedJob {
        completions,
        shell: shell.to_string(),
        command: command.to_string(),
        out: out.to_string(),
        mount_path: mount["mountPath"].as_str().expect("a path").to_string(),
    }
}

#[test]
fn the_readmes_kubernetes_indexed_job_is_one_and_merged_equals_the_whole_sweep() {
    let text = readme();
    let manifest = block(&text, "yaml", "completionMode: Indexed");
    let job = indexed_job(&manifest);
    let merge = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("# then: "))
        .expect("the merge line");
    // `smartio sweep merge GRID PART...`
    let parts: Vec<&str> = merge.split_whitespace().skip(4).collect();
    let expected: Vec<String> = (0..job.completions)
        .map(|i| job.out.replace("$JOB_COMPLETION_INDEX", &i.to_string()))
        .collect();
    assert_eq!(parts, expected, "the merge reads every pod's part: {merge}");

    // Every index's pod, then the merge: the shell commands as written, the volume a
    // directory here, `smartio` the one just built.
    let d = dir("k8s");
    let results = d.join("results");
    std::fs::create_dir_all(&results).expect("the shared volume");
    let results = results.to_str().expect("utf-8");
    let path = path_with_smartio();
    let sh = |line: &str, index: Option<u64>| {
        let mut cmd = Command::new(&job.shell);
        cmd.args(["-c", &line.replace(&job.mount_path, results)])
            .current_dir(&d)
            .env("PATH", &path)
            .env_remove("JOB_COMPLETION_INDEX");
        if let Some(i) = index {
            cmd.env("JOB_COMPLETION_INDEX", i.to_string());
        }
        let out = cmd.output().expect("the shell runs");
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for index in 0..job.completions {
        sh(&job.command, Some(index));
    }
    assert_eq!(
        sh(merge, None),
        whole(),
        "{} pods merged = the whole sweep, byte for byte",
        job.completions
    );
    let _ = std::fs::remove_dir_all(&d);
}
