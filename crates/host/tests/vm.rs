//! A VM's memory backed by its host's RAM: the x86 layout, the translation from guest to host
//! pages, bytes written through the host landing where the guest reads them, and every page
//! given back at shutdown or when the host runs out.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_host::vm::{GuestPageSize, VmMemory, VmMemoryError, VmMemoryLayout, HIGH_MEMORY_BASE};
use smartio_host::HostOs;
use smartio_platform::GuestPhysAddr;

fn borrower() -> (Cluster, HostOs) {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("cluster");
    let os = HostOs::boot_all(&cluster.machine).expect("boots").remove(0);
    assert_eq!(os.name(), "borrower");
    (cluster, os)
}

#[test]
fn a_vm_with_high_memory_is_backed_page_by_page_and_given_back() {
    let (cluster, os) = borrower();
    let before = os.ram_in_use();
    let size = (3u64 << 30) + (4 << 20);
    let layout = VmMemoryLayout::x86(size, GuestPageSize::Huge).expect("layout");
    let vm = VmMemory::back(&os, layout).expect("backed");
    assert_eq!(os.ram_in_use() - before, size);
    assert_eq!(vm.host_pages().len() as u64, size >> 21);
    assert_eq!(vm.memory().mapped_bytes(), size);

    // A guest range across the PCI hole is not RAM; one in high memory is.
    let high = GuestPhysAddr(HIGH_MEMORY_BASE + (2 << 20) - 8);
    let pieces = vm
        .memory()
        .translate(high, 16)
        .expect("high memory is mapped");
    assert_eq!(pieces.iter().map(|p| p.len).sum::<u64>(), 16);
    assert!(vm.memory().translate(GuestPhysAddr(3 << 30), 1).is_err());

    // Bytes the host puts behind a guest address are what the guest reads there.
    let at = vm.memory().translate_addr(high).expect("mapped");
    cluster.machine.poke_memory(os.id(), at, b"guest ram");
    let mut back = [0u8; 9];
    cluster.machine.peek_memory(os.id(), at, &mut back);
    assert_eq!(&back, b"guest ram");

    vm.release(&os);
    assert_eq!(os.ram_in_use(), before, "every page given back");
}

#[test]
fn a_vm_larger_than_the_hosts_free_ram_is_refused_and_leaves_nothing_behind() {
    let (_cluster, os) = borrower();
    let before = os.ram_in_use();
    let layout = VmMemoryLayout::x86(64 << 30, GuestPageSize::Huge).expect("layout");
    let err = VmMemory::back(&os, layout).expect_err("64 GiB host");
    assert!(matches!(err, VmMemoryError::HostRam { .. }), "{err}");
    assert_eq!(os.ram_in_use(), before);
}
