//! The small fabric the engine's integration tests run on.

use smartio_engine::{Calibration, Sim};
use smartio_fabric::{parse_scenario, BarKind, BarSpec, EndpointLayout, Fabric};

/// host ── root port ── sw1 (PEX8796) ── sw2 (PEX8733) ─┬─ dev0
///                                                       └─ dev1
const TWO_SWITCHES: &str = r#"
[[host]]
name = "h"
ram = "4 GiB"
[[host.switch]]
name = "sw1"
chip = "PEX8796"
parent = "root"
link = "gen3 x16"
[[host.switch]]
name = "sw2"
chip = "PEX8733"
parent = "sw1"
link = "gen3 x16"
[[host.device]]
name = "dev0"
kind = "test"
parent = "sw2"
link = "gen3 x16"
[[host.device]]
name = "dev1"
kind = "test"
parent = "sw2"
link = "gen3 x16"
"#;

fn test_layout(_: &str, _: &toml::Table) -> Result<EndpointLayout, String> {
    Ok(EndpointLayout {
        vendor_id: 1,
        device_id: 1,
        class_code: 0,
        description: "test".into(),
        bars: vec![BarSpec {
            index: 0,
            size: 4096,
            kind: BarKind::Mem64,
        }],
        sriov: None,
    })
}

pub fn sim() -> (Sim, Calibration) {
    let spec = parse_scenario("two-switches", TWO_SWITCHES).expect("valid scenario");
    let fabric = Fabric::build(&spec, &test_layout).expect("enumerates");
    // Variation closed: these tests check the formulas against the typical path.
    let cal = Calibration::default_embedded().without_variation();
    (Sim::new(fabric, &cal).expect("calibrated"), cal)
}
