//! NICs in a cluster: the factory's refusals (an unknown `[nic.*]` profile, a network with no
//! `[network]` calibration, each naming the device and its scenario line), ports joining
//! their Ethernet segments, and scenarios without a NIC untouched.

use smartio_calibration::{Calibration, DEFAULT_CALIBRATION};
use smartio_cluster::{Cluster, ClusterError, ClusterOptions, DeviceKind, ModelError};
use smartio_fabric::{parse_scenario, Fabric};

/// `n` hosts, each with one NIC (line 7 of each host block is the device's `name`) with
/// `params`.
fn hosts(n: usize, params: &str) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[[host]]\nname = \"h{i}\"\nram = \"4G\"\n\n[[host.device]]\n\
                 name = \"nic0\"\nkind = \"nic\"\nparent = \"root\"\nlink = \"gen3 x16\"\n\
                 params = {{ {params} }}\n\n"
            )
        })
        .collect()
}

fn start(text: &str, cal: &Calibration) -> Result<Cluster, ClusterError> {
    let spec = parse_scenario("t.toml", text).expect("parses");
    let fabric = Fabric::build(&spec, &smartio_devices::layout_for).expect("builds");
    Cluster::from_fabric(fabric, cal, &ClusterOptions::default())
}

#[test]
fn an_unknown_nic_profile_is_refused_with_the_known_ones() {
    let err = start(
        &hosts(1, "profile = \"cx9\""),
        &Calibration::default_embedded(),
    )
    .expect_err("unknown profile");
    assert!(
        matches!(
            &err,
            ClusterError::Device { device, error: ModelError::Profile(_), .. }
                if device == "h0.nic0"
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .ends_with("unknown NIC profile \"cx9\" (known: connectx5)"),
        "{err}"
    );
}

#[test]
fn a_network_without_a_network_calibration_is_refused_with_the_segment() {
    let start_of_network = DEFAULT_CALIBRATION
        .find("\n# Ethernet between NIC ports")
        .expect("the default has [network]");
    let cal = Calibration::parse("c.toml", &DEFAULT_CALIBRATION[..start_of_network])
        .expect("valid without [network]");
    let err = start(&hosts(1, "network = \"lan\""), &cal).expect_err("no [network]");
    assert_eq!(
        err.to_string(),
        "device h0.nic0: network = \"lan\": the calibration has no [network] section \
         (switch_hop_ns, wire_propagation_ns) to time Ethernet segments"
    );
    // A NIC on no network needs no [network].
    let cluster = start(&hosts(1, ""), &cal).expect("no network asked for");
    assert!(cluster.network().is_none());
    assert_eq!(cluster.nics().count(), 1);
}

#[test]
fn ports_join_their_segment_two_as_a_cable_three_behind_a_switch() {
    let cal = Calibration::default_embedded();
    let two = start(&hosts(2, "network = \"lan\""), &cal).expect("starts");
    let lan = two
        .network()
        .and_then(|n| n.segment("lan"))
        .expect("segment");
    assert_eq!((lan.ports(), lan.is_switched()), (2, false));
    let three = start(&hosts(3, "network = \"lan\""), &cal).expect("starts");
    let lan = three
        .network()
        .and_then(|n| n.segment("lan"))
        .expect("segment");
    assert_eq!((lan.ports(), lan.is_switched()), (3, true));
    let links: Vec<bool> = three.nics().map(|(_, n)| n.port().link_up()).collect();
    assert_eq!(links, vec![true; 3]);
}

#[test]
fn a_scenario_without_a_nic_starts_no_nic_and_no_segment() {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("loads");
    assert_eq!(cluster.models_of(DeviceKind::Nic).count(), 0);
    assert!(cluster
        .network()
        .is_some_and(|n| n.segment("lan").is_none()));
}
