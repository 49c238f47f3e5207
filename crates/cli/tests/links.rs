//! Per-link counters in the `--json` of `fio`, `bench engine` and `exp`: what each link
//! carried each way (TLPs, payload and wire bytes, busy time), so a run's link utilisation
//! can be plotted after the fact.

use crate::common;

use common::{json, smartio};
use serde_json::Value;

/// A direction's four counters.
fn lane(v: &Value) -> [u64; 4] {
    ["tlps", "wire_bytes", "payload_bytes", "busy_ps"].map(|k| v[k].as_u64().expect(k))
}

/// Every link in `links` carried something, each TLP on the wire as its payload plus one
/// fixed overhead per TLP of that link, and took time to send.
fn check_consistent(links: &[Value]) {
    assert!(!links.is_empty());
    for l in links {
        let name = l["link"].as_str().expect("a link name");
        let [down, up] = [lane(&l["down"]), lane(&l["up"])];
        assert!(
            down[0] + up[0] > 0,
            "{name}: a link that carried nothing is left out"
        );
        let overheads: Vec<u64> = [down, up]
            .iter()
            .filter(|d| d[0] > 0)
            .map(|[tlps, wire, payload, busy]| {
                assert!(*busy > 0, "{name}: busy while sending");
                assert_eq!((wire - payload) % tlps, 0, "{name}");
                (wire - payload) / tlps
            })
            .collect();
        assert!(
            overheads.windows(2).all(|w| w[0] == w[1]),
            "{name}: {overheads:?}"
        );
    }
}

/// A 4 KiB random read QD1 on the borrowed NVMe of back-to-back puts the same TLPs on
/// every link of its path: towards the NVMe the two doorbell writes (4 B each) and the
/// completion bringing the 64-byte command the controller read (3 TLPs, 72 B); towards the
/// borrower that read's request (no payload), 16 data writes of 256 B, the 16-byte
/// completion entry and the 4-byte MSI-X write (19 TLPs, 4,116 B). Counted from the first
/// submission to the last completion only.
#[test]
fn fio_json_counts_what_each_link_of_the_path_carried_per_io() {
    let ops = 100;
    let (ok, out, err) = smartio(&[
        "fio",
        "--scenario",
        "back-to-back",
        "--host",
        "borrower",
        "--device",
        "lender:nvme0",
        "--ops",
        &ops.to_string(),
        "--json",
    ]);
    assert!(ok, "{err}");
    let v = json(&out);
    let links = v["links"].as_array().expect("links");
    check_consistent(links);
    let names: Vec<&str> = links.iter().filter_map(|l| l["link"].as_str()).collect();
    assert_eq!(
        names,
        [
            "borrower -> borrower.ntb0",
            "lender.chassis -> lender.nvme0",
            "lender.chassis -> lender.ntb0",
            "lender.ntb0 -> borrower.ntb0"
        ]
    );
    for l in links {
        // Which way is towards the NVMe depends on how the link was declared.
        let name = l["link"].as_str().unwrap_or_default();
        let (to_nvme, to_borrower) = match name {
            "borrower -> borrower.ntb0" | "lender.chassis -> lender.nvme0" => {
                (lane(&l["down"]), lane(&l["up"]))
            }
            _ => (lane(&l["up"]), lane(&l["down"])),
        };
        assert_eq!(to_nvme[0], 3 * ops, "{name}: TLPs towards the NVMe");
        assert_eq!(
            to_nvme[2],
            (4 + 4 + 64) * ops,
            "{name}: payload towards the NVMe"
        );
        assert_eq!(
            to_borrower[0],
            19 * ops,
            "{name}: TLPs towards the borrower"
        );
        assert_eq!(
            to_borrower[2],
            (4096 + 16 + 4) * ops,
            "{name}: payload back"
        );
    }
}

#[test]
fn bench_and_exp_json_carry_link_counters_per_cluster_run() {
    let (ok, out, err) = smartio(&["bench", "engine", "--bytes", "16M", "--json"]);
    assert!(ok, "{err}");
    let v = json(&out);
    let links = v["links"].as_array().expect("links");
    check_consistent(links);
    // 8 MiB copied each way through dma0's link: the payload of its busier direction.
    let payload: u64 = links
        .iter()
        .filter(|l| l["link"].as_str().is_some_and(|n| n.ends_with("dma0")))
        .map(|l| lane(&l["down"])[2].max(lane(&l["up"])[2]))
        .sum();
    assert!(payload >= 8 << 20, "{payload}");

    let (ok, out, err) = smartio(&["exp", "iommu-penalty", "--ops", "1", "--json"]);
    assert!(ok, "{err}");
    let v = json(&out);
    let runs = v["links"].as_array().expect("one entry per cluster run");
    assert!(runs.len() >= 2, "{runs:?}");
    for run in runs {
        assert!(run["scenario"].as_str().is_some());
        check_consistent(run["links"].as_array().expect("links"));
    }
}
