//! One Identify whose data buffer is a multicast group lands in every member host.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{multicast_identify, MulticastIdentifyConfig};

#[test]
fn one_identify_lands_in_all_59_other_hosts_of_the_cascade() {
    let cluster = Cluster::new("cascade-60", &Calibration::default_embedded()).expect("loads");
    let r = multicast_identify(
        &cluster,
        &MulticastIdentifyConfig {
            device: "node00:nvme0".into(),
            manager: "node00".into(),
            unicast: true,
        },
    )
    .expect("runs");
    assert_eq!(r.receivers.len(), 59);
    assert!(r.receivers.iter().all(|x| x.host != "node00"));
    let bad: Vec<_> = r.receivers.iter().filter(|x| !x.verified).collect();
    assert!(bad.is_empty(), "not delivered: {bad:?}");
    assert_eq!(r.verified, 59);
    // The controller fetched exactly one admin command for the 59 copies.
    assert_eq!(r.multicast_commands, 1);
    assert_eq!(r.model, "smartio emulated NVMe (optane-p4800x)");
    // Members hang off all six sub-switches.
    let mut switches: Vec<&str> = r.receivers.iter().map(|x| x.switch.as_str()).collect();
    switches.sort_unstable();
    switches.dedup();
    assert_eq!(switches, ["sub0", "sub1", "sub2", "sub3", "sub4", "sub5"]);
    // The same page host by host takes 59 commands (the controller's count, which wraps its
    // 32-entry admin queue) and far longer.
    assert_eq!((r.unicast_commands, r.unicast_verified), (59, 59));
    assert!(
        r.unicast_ns > 20.0 * r.multicast_ns,
        "unicast {} ns vs multicast {} ns",
        r.unicast_ns,
        r.multicast_ns
    );
    eprintln!(
        "multicast {:.1} ns for 59 hosts; unicast {:.1} ns",
        r.multicast_ns, r.unicast_ns
    );
}
