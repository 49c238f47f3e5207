//! What a guest may count on from the hypervisor, VFIO and SmartIO's MDEV parent, as the
//! `vm_config` fuzzer checks it (what it found among it), as tests that read as that
//! behaviour. Each replays a regression input
//! (`crates/fuzz/regressions/vm_config/`, encoded as `smartio_fuzz::vm_config::ops`
//! documents; `smartio-fuzz decode vm_config FILE` prints it), so the target's checks run
//! too: nothing panics, the run finishes, and the shutdown gives everything back.

use smartio_fuzz::{corpus, vm_config, Outcome};

fn run(name: &str) -> Outcome {
    let path = corpus::regression_dir("vm_config").join(name);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let out = vm_config(&data);
    assert!(out.accepted, "{name}: {}", out.detail);
    out
}

#[test]
fn a_peer_bar_moved_onto_the_address_mapped_for_another_is_what_dma_reaches_there_by_vfio() {
    // dma1's registers were mapped for dma0 at X; then dma1's memory BAR took X and dma0 set
    // Bus Master again. dma0's copy to X lands in dma1's memory, where the guest reads it.
    let out = run("vfio-peer-bar-moved-onto-the-address-of-another.bin");
    assert!(out.detail.contains("1 copies verified"), "{}", out.detail);
}

#[test]
fn a_peer_bar_moved_onto_the_address_mapped_for_another_is_what_dma_reaches_there_by_mdev() {
    let out = run("mdev-peer-bar-moved-onto-the-address-of-another.bin");
    assert!(out.detail.contains("1 copies verified"), "{}", out.detail);
}

#[test]
fn a_vm_whose_guest_driver_never_finishes_unbinding_can_be_powered_off() {
    // The guest masks MSI-X under its own NVMe driver, whose unbind then waits for an admin
    // completion forever: the hypervisor powers the VM off, which gives everything back.
    let out = run("nvme-driver-unbind-hangs-after-the-guest-masks-msix.bin");
    assert!(
        out.detail.contains("shutdown:hung, powered off"),
        "{}",
        out.detail
    );
}

#[test]
fn bars_sized_and_placed_anywhere_with_bus_master_toggled_leave_the_real_function_alone() {
    for backend in ["vfio", "mdev"] {
        let out = run(&format!(
            "{backend}-bar-sizing-at-odd-addresses-and-bus-master-toggles.bin"
        ));
        assert!(out.detail.contains("42 ops, 0 failed"), "{}", out.detail);
        assert!(out.detail.contains("2 copies verified"), "{}", out.detail);
    }
}

#[test]
fn a_copy_into_overlapping_guest_bars_is_not_held_to_either() {
    let out = run("overlapping-guest-bars.bin");
    assert!(out.detail.contains("0 copies verified"), "{}", out.detail);
}
