//! The scenarios shipped with smartio (embedded in the binary) and loading of scenario files.
//!
//! A scenario argument is either a shipped name (`local-chassis`) or a path to a TOML file.

use smartio_fabric::{parse_scenario, ClusterSpec, Fabric, ScenarioError};
use std::path::Path;

/// A scenario that ships with smartio.
#[derive(Debug, Clone, Copy)]
pub struct ShippedScenario {
    /// Its name, which is part of the command-line interface.
    pub name: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

/// All shipped scenarios.
pub const SHIPPED: &[ShippedScenario] = &[
    ShippedScenario {
        name: "local-chassis",
        text: include_str!("../../../scenarios/local-chassis.toml"),
    },
    ShippedScenario {
        name: "local-chassis-extra-hop",
        text: include_str!("../../../scenarios/local-chassis-extra-hop.toml"),
    },
    ShippedScenario {
        name: "back-to-back",
        text: include_str!("../../../scenarios/back-to-back.toml"),
    },
    ShippedScenario {
        name: "back-to-back-lender-iommu",
        text: include_str!("../../../scenarios/back-to-back-lender-iommu.toml"),
    },
    ShippedScenario {
        name: "cluster-switch",
        text: include_str!("../../../scenarios/cluster-switch.toml"),
    },
    ShippedScenario {
        name: "nvme-cluster",
        text: include_str!("../../../scenarios/nvme-cluster.toml"),
    },
    ShippedScenario {
        name: "dual-path",
        text: include_str!("../../../scenarios/dual-path.toml"),
    },
    ShippedScenario {
        name: "vm-back-to-back",
        text: include_str!("../../../scenarios/vm-back-to-back.toml"),
    },
    ShippedScenario {
        name: "vm-chassis",
        text: include_str!("../../../scenarios/vm-chassis.toml"),
    },
    ShippedScenario {
        name: "vm-cluster",
        text: include_str!("../../../scenarios/vm-cluster.toml"),
    },
    ShippedScenario {
        name: "cascade-60",
        text: include_str!("../../../scenarios/cascade-60.toml"),
    },
    ShippedScenario {
        name: "sriov",
        text: include_str!("../../../scenarios/sriov.toml"),
    },
    ShippedScenario {
        name: "sriov-share",
        text: include_str!("../../../scenarios/sriov-share.toml"),
    },
    ShippedScenario {
        name: "video-lending",
        text: include_str!("../../../scenarios/video-lending.toml"),
    },
    ShippedScenario {
        name: "pxh810-back-to-back",
        text: include_str!("../../../scenarios/pxh810-back-to-back.toml"),
    },
    ShippedScenario {
        name: "mesh-3",
        text: include_str!("../../../scenarios/mesh-3.toml"),
    },
    ShippedScenario {
        name: "mesh-3-lender-iommu",
        text: include_str!("../../../scenarios/mesh-3-lender-iommu.toml"),
    },
];

/// Parses a shipped scenario by name, or a scenario file by path.
pub fn load_spec(name_or_path: &str) -> Result<ClusterSpec, ScenarioError> {
    if let Some(s) = SHIPPED.iter().find(|s| s.name == name_or_path) {
        return parse_scenario(&format!("{}.toml", s.name), s.text);
    }
    let path = Path::new(name_or_path);
    if path.extension().is_some_and(|e| e == "toml") || path.exists() {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: name_or_path.to_string(),
            line: None,
            message: format!("cannot read the scenario file: {e}"),
        })?;
        return parse_scenario(name_or_path, &text);
    }
    let known: Vec<&str> = SHIPPED.iter().map(|s| s.name).collect();
    let hint = nearest(name_or_path, known.iter().copied())
        .map(|n| format!("; did you mean `{n}`?"))
        .unwrap_or_default();
    Err(ScenarioError {
        file: name_or_path.to_string(),
        line: None,
        message: format!(
            "no shipped scenario of that name and no such file{hint} (shipped: {}; `smartio scenarios` describes them)",
            known.join(", ")
        ),
    })
}

/// The candidate closest to `name`, if one is close enough to be a misspelling of it: the
/// highest Jaro similarity above 0.7, the rule clap uses to suggest a subcommand.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro(name, c), c))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Parses and enumerates a scenario with the device layer's endpoint layouts.
pub fn load_fabric(name_or_path: &str) -> Result<Fabric, ScenarioError> {
    let spec = load_spec(name_or_path)?;
    Fabric::build(&spec, &smartio_devices::layout_for)
}

/// The ASCII diagram at the top of a shipped scenario file: the block of its leading
/// comment between the first empty comment line and the next (the convention every shipped
/// scenario follows), without the `# ` prefix.
pub fn diagram(s: &ShippedScenario) -> Vec<String> {
    s.text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim_end())
        .skip_while(|l| !l.is_empty())
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.strip_prefix(' ').unwrap_or(l).to_string())
        .collect()
}

/// The one-line description of a shipped scenario.
pub fn description(s: &ShippedScenario) -> String {
    parse_scenario(s.name, s.text)
        .map(|c| c.description)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_starts_with_a_diagram() {
        for s in SHIPPED {
            let d = diagram(s);
            assert!(d.len() >= 2, "{} has no diagram: {d:?}", s.name);
        }
        let b2b = SHIPPED
            .iter()
            .find(|s| s.name == "back-to-back")
            .expect("shipped");
        let d = diagram(b2b);
        assert!(d[0].contains("borrower (64 GiB)"), "{d:?}");
        assert!(d.iter().any(|l| l.contains("ntb0 (PEX8733, NTB)")));
    }

    #[test]
    fn a_misspelt_scenario_name_suggests_the_nearest_shipped_one() {
        let err = load_spec("back-to-bak").expect_err("misspelt");
        assert_eq!(err.line, None);
        let text = err.to_string();
        assert!(
            text.starts_with("back-to-bak: no shipped scenario"),
            "{text}"
        );
        assert!(text.contains("did you mean `back-to-back`?"), "{text}");
        assert_eq!(
            nearest("clustr-switch", SHIPPED.iter().map(|s| s.name)),
            Some("cluster-switch")
        );
        assert_eq!(
            nearest("sriov-shar", SHIPPED.iter().map(|s| s.name)),
            Some("sriov-share")
        );
        let far = load_spec("zzzz").expect_err("unknown").to_string();
        assert!(!far.contains("did you mean"), "{far}");
    }

    #[test]
    fn every_shipped_scenario_builds() {
        for s in SHIPPED {
            let fabric = load_fabric(s.name).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_eq!(fabric.name, s.name);
            assert!(!description(s).is_empty(), "{} has no description", s.name);
        }
    }

    #[test]
    fn mesh_3s_bars_lie_within_the_k420s_40_bit_reach() {
        for name in ["mesh-3", "mesh-3-lender-iommu"] {
            let fabric = load_fabric(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut bars = 0;
            for e in fabric.endpoints() {
                for bar in &e.bars {
                    let end = bar.base.0 + bar.size;
                    assert!(
                        end <= 1 << 40,
                        "{name}: {} BAR{} ends at {end:#x}",
                        e.name,
                        bar.index
                    );
                    bars += 1;
                }
            }
            assert!(bars >= 10, "{name}: {bars} BARs");
            assert!(fabric.hosts().iter().all(|h| h.mmio64.start == 66 << 30));
        }
    }

    #[test]
    fn an_unknown_scenario_lists_the_shipped_ones() {
        let err = load_spec("no-such-scenario").expect_err("unknown");
        assert!(err.message.contains("local-chassis"), "{err}");
    }
}
