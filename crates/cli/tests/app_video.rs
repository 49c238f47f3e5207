//! `smartio app video` and `smartio exp video` as a user runs them (Paper II on
//! `video-lending`): the figures, the notes that say where they come from, and refusals.

use crate::common;

use common::{json, smartio};
use std::path::PathBuf;

/// The text with its wrapped lines joined (a note's continuation lines are indented).
fn flat(out: &str) -> String {
    out.split('\n').map(str::trim).collect::<Vec<_>>().join(" ")
}

fn numbers(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect()
}

#[test]
fn app_video_defaults_to_paper_iis_pool_and_verifies_every_frame() {
    let (ok, out, err) = smartio(&["app", "video", "--streams", "3", "--frames", "4", "--json"]);
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["scenario"], "video-lending");
    assert_eq!(v["host"], "machine-a");
    assert_eq!(v["frames_verified"], 12);
    assert_eq!(v["borrowed"], serde_json::json!(["machine-b:gpu0"]));
    let devices: Vec<&str> = v["gpus"]
        .as_array()
        .expect("gpus")
        .iter()
        .filter_map(|g| g["device"].as_str())
        .collect();
    assert_eq!(devices, ["gpu0", "gpu1", "gpu2", "machine-b:gpu0"]);
    let fps = numbers(&v["stream_fps"]);
    assert_eq!(fps.len(), 3);
    assert!(fps.iter().all(|f| (f - 30.0).abs() < 1e-4), "{fps:?}");
}

#[test]
fn app_video_says_where_the_figures_come_from_and_that_the_local_gpus_fall_behind() {
    let (ok, out, err) = smartio(&[
        "app",
        "video",
        "--streams",
        "12",
        "--frames",
        "4",
        "--gpus",
        "gpu0,gpu1,gpu2",
    ]);
    assert!(ok, "{err}");
    let out = flat(&out);
    for text in [
        "verified: 48 of 48 frames",
        "eir_frame_ns",
        "gpu0 (k40c) 6.876 ms, gpu1 (k2200) 22.690 ms, gpu2 (gtx750) 28.260 ms",
        "[video] decode_frame_ns",
        "where a frame's time went",
        "the GPUs fall behind: 360 frames/s asked against 224.9 frames/s",
    ] {
        assert!(out.contains(text), "missing {text:?} in\n{out}");
    }
    assert!(!out.contains("borrowed for the run"), "{out}");
}

#[test]
fn app_video_names_a_borrowed_gpus_path_and_refuses_a_gpu_listed_twice() {
    let (ok, out, err) = smartio(&["app", "video", "--streams", "2", "--frames", "3"]);
    assert!(ok, "{err}");
    let out = flat(&out);
    assert!(
        out.contains("machine-b:gpu0 is borrowed for the run by Device Lending")
            && out.contains("machine-b → machine-b.ntb0 → machine-a.ntb0 → machine-a"),
        "{out}"
    );
    let (ok, _, err) = smartio(&["app", "video", "--gpus", "gpu1,gpu1"]);
    assert!(!ok);
    assert!(err.contains("gpu1 and gpu1 are the same GPU"), "{err}");
    let (ok, _, err) = smartio(&["app", "video", "--streams", "0"]);
    assert!(!ok);
    assert!(err.contains("'0'") && err.contains("1..=64"), "{err}");
}

#[test]
fn exp_video_sweeps_16_streams_states_the_crossover_and_writes_two_figures() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("smartio-exp-video-{}", std::process::id()));
    let (ok, out, err) = smartio(&[
        "exp",
        "video",
        "--ops",
        "2",
        "--json",
        "--plots",
        dir.to_str().expect("utf-8"),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["scenario"], "video-lending");
    let rows = v["result"].as_array().expect("rows");
    assert_eq!(rows.len(), 16);
    let total = |r: &serde_json::Value, pool: &str| r[pool]["total_fps"].as_f64().expect("total");
    // Up to 6 streams the local GPUs keep up: the borrowed one adds nothing.
    for r in &rows[..6] {
        let (a, b) = (total(r, "local"), total(r, "with_borrowed"));
        assert!((a - b).abs() < 1e-5 * a, "{r}");
    }
    // At 16 the local GPUs deliver their profiles' 225 frames/s, the pool 50 % more.
    let last = &rows[15];
    assert!(total(last, "local") < 226.0, "{last}");
    assert!(
        total(last, "with_borrowed") > 1.5 * total(last, "local"),
        "{last}"
    );
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    let crossover = notes
        .iter()
        .find_map(|n| n.strip_prefix("crossover at "))
        .unwrap_or_else(|| panic!("no crossover note: {notes:?}"));
    let streams: u32 = crossover
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a stream count");
    // Two frames per stream measure roughly: Paper II's 7 → 8, give or take a stream.
    assert!((7..=9).contains(&streams), "{crossover}");
    assert!(
        crossover.contains(&format!(
            "`smartio app video --streams {streams} --frames 2 --gpus gpu0,gpu1,gpu2`"
        )),
        "{crossover}"
    );
    assert!(notes.iter().any(|n| n.starts_with("Paper II")), "{notes:?}");
    assert_eq!(v["plots"].as_array().map(Vec::len), Some(2));
}

#[test]
fn exp_video_refuses_a_single_frame_per_stream() {
    let (ok, _, err) = smartio(&["exp", "video", "--ops", "1"]);
    assert!(!ok);
    assert!(
        err.contains("--ops 1: video takes frames per stream, 2 to 10000"),
        "{err}"
    );
}
