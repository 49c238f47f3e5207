//! The small fabric the engine's integration tests run on.

use smartio_engine::{Calibration, Sim};
use smartio_fabric::{
    parse_scenario, BarKind, BarSpec, EndpointId, EndpointLayout, Fabric, HostId,
};

/// host ── root port ── sw1 (PEX8796) ── sw2 (PEX8733) ─┬─ dev0
///                                                       └─ dev1
#[allow(dead_code)] // not every test target that includes this module uses it
pub const TWO_SWITCHES: &str = r#"
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

#[allow(dead_code)] // not every test target that includes this module uses it
pub fn sim() -> (Sim, Calibration) {
    // Variation closed: these tests check the formulas against the typical path.
    sim_of(
        TWO_SWITCHES,
        Calibration::default_embedded().without_variation(),
    )
}

/// [`sim`] with the host's IOMMU on, its IOTLB flushed every `flush_batch` unmaps.
#[allow(dead_code)] // not every test target that includes this module uses it
pub fn sim_with_iommu(flush_batch: u64) -> (Sim, Calibration) {
    let text = TWO_SWITCHES.replace("ram = \"4 GiB\"", "ram = \"4 GiB\"\niommu = true");
    let mut cal = Calibration::default_embedded().without_variation();
    cal.root_complex.iotlb_flush_batch.value = flush_batch as f64;
    sim_of(&text, cal)
}

/// The engine on the scenario `text`, every device of the test layout (one 4 KiB BAR).
#[allow(dead_code)] // not every test target that includes this module uses it
pub fn sim_of(text: &str, cal: Calibration) -> (Sim, Calibration) {
    let spec = parse_scenario("two-switches", text).expect("valid scenario");
    let fabric = Fabric::build(&spec, &test_layout).expect("enumerates");
    (Sim::new(fabric, &cal).expect("calibrated"), cal)
}

/// The endpoints named dev0 and dev1 on host 0 (the test scenarios' two devices).
#[allow(dead_code)] // not every test target that includes this module uses it
pub fn two_devices(sim: &Sim) -> (EndpointId, EndpointId) {
    let f = sim.fabric();
    let by = |n| f.endpoint_by_name(HostId(0), n).expect("device");
    (by("dev0"), by("dev1"))
}
