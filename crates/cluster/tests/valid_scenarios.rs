//! Property test: random *valid* scenarios — hosts with any RAM size in range, switches,
//! devices of every kind with their parameters, NTB adapters with windows and table sizes,
//! cables back to back and to cluster switches (cascaded) — always parse, build, enumerate and
//! resolve their timing, and the result satisfies every invariant of `common` (no overlapping
//! BARs or windows, natural alignment, disjoint sibling windows, unique requester ids, NTB
//! tables inside their windows, cable paths through cluster switches only).
//!
//! Scenarios are generated from a vector of random numbers; shrinking that vector towards
//! zeros shrinks the scenario towards the smallest one, and a failure prints the TOML text.

use proptest::prelude::*;
use smartio_calibration::Calibration;
use smartio_cluster::Sim;
use smartio_fabric::enumerate::{MAX_RAM, MIN_RAM};
use smartio_fabric::units::format_size;
use smartio_fabric::{parse_scenario, Fabric};
use std::fmt::Write;

use crate::common;

/// Choices drawn from a list of random numbers (0 once it runs out).
struct Draw {
    values: Vec<u32>,
    next: usize,
}

impl Draw {
    fn raw(&mut self) -> u32 {
        let v = self.values.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        v
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        let wide = (u64::from(self.raw()) << 32) | u64::from(self.raw());
        wide % n.max(1)
    }

    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// A power of two in `lo..=hi` (both powers of two).
    fn power_of_two(&mut self, lo: u64, hi: u64) -> u64 {
        let (a, b) = (lo.trailing_zeros(), hi.trailing_zeros());
        1 << self.range(u64::from(a), u64::from(b))
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A size written the way a user might: bytes, or the exact binary-unit form.
fn size(draw: &mut Draw, bytes: u64) -> String {
    if draw.chance(50) {
        bytes.to_string()
    } else {
        format!("{:?}", format_size(bytes))
    }
}

fn link(draw: &mut Draw) -> String {
    format!(
        "\"gen{} x{}\"",
        draw.range(1, 5),
        draw.pick(&[1, 2, 4, 8, 16, 32])
    )
}

/// A random valid scenario and the RAM each host should have.
fn scenario(draw: &mut Draw) -> (String, Vec<u64>) {
    let mut text = String::from("name = \"random\"\n");
    let hosts = draw.range(1, 5) as usize;
    let switches = draw.below(4) as usize;
    let mut free_ports = Vec::new();
    for s in 0..switches {
        let ports = if draw.chance(50) {
            24
        } else {
            draw.range(8, 256)
        };
        let _ = write!(
            text,
            "[[cluster_switch]]\nname = \"cs{s}\"\nchip = \"PM8536\"\n"
        );
        if ports != 24 {
            let _ = writeln!(text, "ports = {ports}");
        }
        free_ports.push(ports);
        // A tree of switches: an uplink to an earlier one (which then uses a port too).
        if s > 0 && draw.chance(80) {
            let up = draw.below(s as u64) as usize;
            if free_ports[up] > 0 && free_ports[s] > 0 {
                free_ports[up] -= 1;
                free_ports[s] -= 1;
                let _ = writeln!(text, "uplink = \"cs{up}\"\ncable = {}", link(draw));
            }
        }
    }
    let mut rams = Vec::new();
    let mut adapters: Vec<(String, bool)> = Vec::new(); // "host.ntb", cabled
    let mut host_texts = Vec::new();
    for h in 0..hosts {
        let ram = draw.range(MIN_RAM, MAX_RAM);
        rams.push(ram);
        let name = format!("h{h}-{}", draw.pick(&["a", "B_c", "node-x", "Z9"]));
        let mut t = format!("[[host]]\nname = \"{name}\"\nram = {}\n", size(draw, ram));
        if draw.chance(50) {
            t += "iommu = true\n";
        }
        if draw.chance(30) {
            let _ = writeln!(t, "cores = {}", draw.range(1, 1024));
        }
        let mut parents = vec!["root".to_string()];
        for s in 0..draw.below(4) {
            let parent = parents[draw.below(parents.len() as u64) as usize].clone();
            let chip = draw.pick(&["PEX8796", "PEX8733", "PEX8747", "PEX8749"]);
            let _ = write!(
                t,
                "[[host.switch]]\nname = \"sw{s}\"\nchip = \"{chip}\"\nparent = \"{parent}\"\nlink = {}\n",
                link(draw)
            );
            parents.push(format!("sw{s}"));
        }
        for d in 0..draw.below(5) {
            let parent = parents[draw.below(parents.len() as u64) as usize].clone();
            let kind = draw.pick(&["nvme", "gpu", "dma"]);
            let _ = write!(
                t,
                "[[host.device]]\nname = \"{kind}{d}\"\nkind = \"{kind}\"\nparent = \"{parent}\"\nlink = {}\n",
                link(draw)
            );
            let mut params = Vec::new();
            if kind == "nvme" {
                let lba = draw.pick(&[512u64, 4096]);
                params.push(format!(
                    "profile = \"{}\"",
                    draw.pick(&["optane-p4800x", "ramdisk", "nand"])
                ));
                if draw.chance(50) {
                    params.push(format!("queues = {}", draw.range(2, 256)));
                }
                params.push(format!("namespaces = {}", draw.range(1, 4)));
                params.push(format!("lba_size = {lba}"));
                if draw.chance(50) {
                    let cmb = draw_cmb(draw);
                    params.push(format!("cmb = {}", size(draw, cmb)));
                }
                if draw.chance(50) {
                    let capacity = draw.range(1, 1 << 20) * lba;
                    params.push(format!("capacity = {}", size(draw, capacity)));
                }
            } else if draw.chance(70) {
                let memory = draw.power_of_two(1 << 20, 64 << 30);
                params.push(format!("memory = {}", size(draw, memory)));
            }
            let _ = writeln!(t, "params = {{ {} }}", params.join(", "));
        }
        for n in 0..draw.below(3) {
            let parent = parents[draw.below(parents.len() as u64) as usize].clone();
            let window = draw.power_of_two(1 << 20, 256 << 30);
            let _ = write!(
                t,
                "[[host.ntb]]\nname = \"ntb{n}\"\nchip = \"PEX8733\"\nparent = \"{parent}\"\nlink = {}\nwindow = {}\n",
                link(draw),
                size(draw, window)
            );
            if draw.chance(50) {
                let most = (window / 4096).min(4096);
                let _ = writeln!(t, "lut_entries = {}", draw.range(1, most));
            }
            if draw.chance(50) {
                let _ = writeln!(t, "requester_ids = {}", draw.range(2, 1024));
            }
            // Cabled to a cluster switch with a free port, back to back with an earlier
            // adapter that has no cable yet, or not at all.
            let me = format!("{name}.ntb{n}");
            let mut cabled = false;
            match draw.below(3) {
                0 if !free_ports.is_empty() => {
                    let s = draw.below(free_ports.len() as u64) as usize;
                    if free_ports[s] > 0 {
                        free_ports[s] -= 1;
                        let _ = writeln!(t, "connect = \"cs{s}\"");
                        cabled = true;
                    }
                }
                1 => {
                    let open: Vec<usize> =
                        (0..adapters.len()).filter(|&i| !adapters[i].1).collect();
                    if !open.is_empty() {
                        let other = open[draw.below(open.len() as u64) as usize];
                        adapters[other].1 = true;
                        let _ = writeln!(
                            t,
                            "connect = \"{}\"\ncable = {}",
                            adapters[other].0,
                            link(draw)
                        );
                        cabled = true;
                    }
                }
                _ => {}
            }
            adapters.push((me, cabled));
        }
        host_texts.push(t);
    }
    // Hosts after the cluster switches; an adapter may name one declared earlier or later.
    for t in host_texts {
        text += &t;
    }
    (text, rams)
}

fn draw_cmb(draw: &mut Draw) -> u64 {
    if draw.chance(20) {
        0
    } else {
        draw.power_of_two(4096, 1 << 30)
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        .. ProptestConfig::default()
    })]

    #[test]
    fn random_valid_scenarios_parse_build_and_enumerate_without_overlap(
        values in proptest::collection::vec(any::<u32>(), 0..400)
    ) {
        let mut draw = Draw { values, next: 0 };
        let (text, rams) = scenario(&mut draw);
        let spec = match parse_scenario("random.toml", &text) {
            Ok(spec) => spec,
            Err(e) => panic!("{e}\n{text}"),
        };
        let parsed: Vec<u64> = spec.hosts.iter().map(|h| h.ram).collect();
        prop_assert_eq!(parsed, rams, "{}", text);
        let fabric = match Fabric::build(&spec, &smartio_devices::layout_for) {
            Ok(f) => f,
            Err(e) => panic!("{e}\n{text}"),
        };
        common::check_all(&fabric);
        let sim = match Sim::new(fabric, &Calibration::default_embedded()) {
            Ok(sim) => sim,
            Err(e) => panic!("{e}\n{text}"),
        };
        // The calibration sized the tables the scenario left open; they still fit.
        common::check_ntb_tables(&sim.fabric());
    }
}
