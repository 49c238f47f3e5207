//! Load-time validation seen from a whole cluster: device parameters are checked when the
//! fabric is built (the message names the file, the device's line, the parameter, the value and
//! the allowed range), calibration values that only matter for one device are checked when it
//! is started, and everything that ships still loads.

use smartio_calibration::Calibration;
use smartio_calibration::DEFAULT_CALIBRATION;
use smartio_cluster::{Cluster, ClusterError, ModelError, SHIPPED};
use smartio_fabric::{parse_scenario, Fabric};

/// One host with an NVMe (line 11 is the device's `name`) and a GPU (line 17).
const HOST: &str = r#"
[[host]]
name = "a"
ram = "4G"
[[host.switch]]
name = "sw"
chip = "PEX8796"
parent = "root"
link = "gen3 x16"
[[host.device]]
name = "nvme0"
kind = "nvme"
parent = "sw"
link = "gen3 x4"
params = { profile = "ramdisk" }
[[host.device]]
name = "gpu0"
kind = "gpu"
parent = "sw"
link = "gen3 x16"
"#;

fn host() -> String {
    HOST.to_string()
}

fn build(text: &str) -> Result<Fabric, String> {
    let spec = parse_scenario("t.toml", text).map_err(|e| e.to_string())?;
    Fabric::build(&spec, &smartio_devices::layout_for).map_err(|e| e.to_string())
}

#[test]
fn the_test_host_builds() {
    let fabric = build(&host()).expect("valid");
    assert_eq!(fabric.endpoints().len(), 2);
}

#[test]
fn a_bad_device_parameter_names_file_device_line_key_value_and_range() {
    for (params, message) in [
        (
            "{ profile = \"ramdisk\", queues = 1 }",
            "t.toml:11: device \"nvme0\" (kind \"nvme\"): queues = 1: too small (allowed: 2 to 256)",
        ),
        (
            "{ lba_size = 520 }",
            "t.toml:11: device \"nvme0\" (kind \"nvme\"): lba_size = 520: not a supported block \
             size (allowed: 512 or 4096)",
        ),
        (
            "{ capacity = \"1.25K\" }",
            "t.toml:11: device \"nvme0\" (kind \"nvme\"): capacity = \"1.25K\": not a positive \
             multiple of lba_size (512)",
        ),
    ] {
        let text = host().replace("{ profile = \"ramdisk\" }", params);
        let Err(err) = build(&text) else {
            panic!("{params} was accepted")
        };
        assert!(err.starts_with(message), "{params}: {err}");
    }
    let text = host().replace(
        "kind = \"gpu\"",
        "kind = \"gpu\"\nparams = { memory = \"2T\" }",
    );
    let Err(err) = build(&text) else {
        panic!("2T of GPU memory was accepted")
    };
    assert_eq!(
        err,
        "t.toml:17: device \"gpu0\" (kind \"gpu\"): memory = \"2T\": too large (allowed: a \
         power of two from 1M to 1T)"
    );
}

#[test]
fn a_dma_test_device_vfs_count_is_checked_at_and_beyond_its_range() {
    let with_vfs = |vfs: &str| {
        host().replace(
            "kind = \"gpu\"",
            &format!("kind = \"dma\"\nparams = {{ vfs = {vfs} }}"),
        )
    };
    for ok in ["1", "64"] {
        let fabric = build(&with_vfs(ok)).expect(ok);
        let vfs = fabric.endpoints().len() - 2;
        assert_eq!(vfs.to_string(), ok, "one VF endpoint per TotalVFs");
    }
    for (vfs, message) in [
        (
            "0",
            "t.toml:17: device \"gpu0\" (kind \"dma\"): vfs = 0: too small (TotalVFs of the \
             DMA test device) (allowed: 1 to 64)",
        ),
        (
            "65",
            "t.toml:17: device \"gpu0\" (kind \"dma\"): vfs = 65: too large (TotalVFs of the \
             DMA test device) (allowed: 1 to 64)",
        ),
        (
            "2.5",
            "t.toml:17: device \"gpu0\" (kind \"dma\"): vfs = 2.5: expected a whole number \
             (allowed: 1 to 64)",
        ),
    ] {
        let Err(err) = build(&with_vfs(vfs)) else {
            panic!("vfs = {vfs} was accepted")
        };
        assert_eq!(err, message);
    }
}

#[test]
fn a_profile_capacity_below_one_logical_block_is_an_error_not_an_empty_namespace() {
    let calibration = Calibration::parse(
        "c.toml",
        &DEFAULT_CALIBRATION.replacen("capacity = { value = 8e9,", "capacity = { value = 512,", 1),
    )
    .expect("512 bytes is a valid capacity");
    let path = std::env::temp_dir().join(format!("smartio-validate-{}.toml", std::process::id()));
    let text = host().replace(
        "{ profile = \"ramdisk\" }",
        "{ profile = \"ramdisk\", lba_size = 4096 }",
    );
    std::fs::write(&path, text).expect("temp file");
    let result = Cluster::new(&path.to_string_lossy(), &calibration);
    let _ = std::fs::remove_file(&path);
    match result {
        Err(ClusterError::Device { at, device, error }) => {
            let file = path.to_string_lossy();
            assert!(
                at.as_deref().is_some_and(|a| a.starts_with(&*file)),
                "{at:?} names the scenario file and line"
            );
            assert_eq!(device, "a.nvme0");
            assert!(
                matches!(error, ModelError::Capacity { lba: 4096, .. }),
                "{error:?}"
            );
            assert_eq!(
                error.to_string(),
                "calibration [nvme.ramdisk] capacity = 512: smaller than one logical block of \
                 lba_size = 4096 (allowed: at least 4096 bytes)"
            );
        }
        other => panic!("expected a device error, got {other:?}"),
    }
}

#[test]
fn every_shipped_scenario_starts_with_the_embedded_calibration() {
    let calibration = Calibration::default_embedded();
    for s in SHIPPED {
        let cluster =
            Cluster::new(s.name, &calibration).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        assert!(!cluster.machine.fabric().hosts().is_empty(), "{}", s.name);
    }
}
