//! Golden outputs: the JSON of a named set of runs, byte for byte as committed in
//! `tests/golden/`. Work on the engine's speed must not move a single result, so every one of
//! these is compared whole. A change that is meant to change results (say a new layout of the
//! random streams) re-records them once, in its own commit that says why: run this test with
//! `SMARTIO_BLESS=1` to rewrite the files.

use crate::common;

use common::smartio;
use std::path::PathBuf;

/// A recorded run: its file name and the command line.
struct Golden {
    name: &'static str,
    args: &'static [&'static str],
}

const RUNS: &[Golden] = &[
    Golden {
        name: "fio-back-to-back-randread-qd1",
        args: &[
            "fio",
            "--scenario",
            "back-to-back",
            "--host",
            "borrower",
            "--device",
            "lender:nvme0",
            "--ops",
            "20000",
            "--json",
        ],
    },
    Golden {
        name: "exp-share-30",
        args: &["exp", "share-30", "--ops", "50", "--json"],
    },
    Golden {
        name: "exp-iommu-penalty",
        args: &["exp", "iommu-penalty", "--ops", "1", "--json"],
    },
    Golden {
        name: "exp-vm-nvme",
        args: &["exp", "vm-nvme", "--json"],
    },
    Golden {
        name: "pingpong-vm-back-to-back",
        args: &[
            "pingpong",
            "--scenario",
            "vm-back-to-back",
            "--from",
            "borrower",
            "--to",
            "lender",
            "--json",
        ],
    },
    Golden {
        name: "bench-engine-64m",
        args: &["bench", "engine", "--bytes", "64M", "--json"],
    },
];

/// Fields of a run's JSON that measure the machine the emulator runs on, not the emulation:
/// left out of the comparison.
const WALL_CLOCK_FIELDS: &[&str] = &["wall_seconds", "tlp_arrivals_per_s"];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The run's output with the wall-clock fields removed (the rest unchanged, in order).
fn emulated_part(out: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(out).expect("the run prints JSON");
    if let Some(map) = v.as_object_mut() {
        for field in WALL_CLOCK_FIELDS {
            map.remove(*field);
        }
    }
    let mut text = serde_json::to_string_pretty(&v).expect("serialisable");
    text.push('\n');
    text
}

#[test]
fn the_named_runs_print_exactly_what_was_recorded() {
    let bless = std::env::var_os("SMARTIO_BLESS").is_some();
    let mut differ = Vec::new();
    for run in RUNS {
        let (ok, out, err) = smartio(run.args);
        assert!(ok, "{}: {err}", run.name);
        let got = emulated_part(&out);
        let path = golden_dir().join(format!("{}.json", run.name));
        if bless {
            std::fs::write(&path, &got).expect("golden file written");
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (record it with SMARTIO_BLESS=1)", path.display()));
        if got != want {
            let line = got
                .lines()
                .zip(want.lines())
                .position(|(g, w)| g != w)
                .unwrap_or(got.lines().count().min(want.lines().count()));
            differ.push(format!(
                "{} (`smartio {}`) differs from line {}: got {:?}, recorded {:?}",
                run.name,
                run.args.join(" "),
                line + 1,
                got.lines().nth(line).unwrap_or("<end>"),
                want.lines().nth(line).unwrap_or("<end>"),
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn a_different_result_is_caught() {
    let recorded = std::fs::read_to_string(golden_dir().join("pingpong-vm-back-to-back.json"))
        .expect("recorded");
    let (ok, out, err) = smartio(&[
        "pingpong",
        "--scenario",
        "vm-back-to-back",
        "--from",
        "borrower",
        "--to",
        "lender",
        "--seed",
        "2",
        "--json",
    ]);
    assert!(ok, "{err}");
    assert_ne!(
        emulated_part(&out),
        recorded,
        "another seed gives other times"
    );
}
