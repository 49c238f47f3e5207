//! A VM's memory backed by its host's RAM: the x86 layout, the translation from guest to host
//! pages, bytes written through the host landing where the guest reads them, and every page
//! given back at shutdown or when the host runs out.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_host::hypervisor::{Vm, VmConfig};
use smartio_host::vm::{GuestPageSize, VmMemory, VmMemoryError, VmMemoryLayout, HIGH_MEMORY_BASE};
use smartio_host::HostOs;
use smartio_platform::{Clock, GuestPhysAddr, SimDuration};

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

/// A VM of 64 MiB on the borrower, no function passed through.
fn small_vm(os: &HostOs) -> Vm {
    let config = VmConfig {
        name: "vm0".into(),
        memory: 64 << 20,
        page: GuestPageSize::Huge,
    };
    Vm::create(os, &config, &[]).expect("vm")
}

/// An interrupt for a relay that reaches the host after the VM stopped is not the VM's: the
/// relay's wait says so (it ends instead of handling it), even when the interrupt is already
/// pending as the wait starts.
#[test]
fn an_interrupt_pending_for_a_stopped_vm_is_not_taken_as_delivered() {
    let (cluster, os) = borrower();
    let vm = small_vm(&os);
    let ctx = vm.context().clone();
    let cpu = cluster.machine.cpu(os.id());
    let host = os.id();
    let seen = cluster.machine.run_task(async move {
        cpu.machine().raise_interrupt(host, 40);
        let running = ctx.interrupt_while_running(&cpu, 40).await;
        vm.power_off().await.expect("powered off");
        assert!(!ctx.running());
        cpu.machine().raise_interrupt(host, 40);
        cpu.sleep(SimDuration::from_us(10)).await;
        let stopped = ctx.interrupt_while_running(&cpu, 40).await;
        (running, stopped)
    });
    assert_eq!(seen, Some((true, false)));
}

/// Injecting into a stopped VM raises nothing in its guest.
#[test]
fn nothing_is_injected_into_a_stopped_vm() {
    let (cluster, os) = borrower();
    let vm = small_vm(&os);
    let ctx = vm.context().clone();
    let cpu = cluster.machine.cpu(os.id());
    let raised = cluster.machine.run_task(async move {
        ctx.inject(41).await;
        let while_running = cpu.interrupt_timeout(41, SimDuration::from_us(50)).await;
        vm.power_off().await.expect("powered off");
        ctx.inject(41).await;
        let after_stop = cpu.interrupt_timeout(41, SimDuration::from_us(50)).await;
        (while_running, after_stop)
    });
    assert_eq!(raised, Some((true, false)));
}

/// A relayed interrupt reaches the guest as its own vector each time the host's fires, for
/// as long as the VM runs; a stopped VM's guest gets none, and it cannot be powered on again.
#[test]
fn a_relayed_interrupt_reaches_the_guest_while_the_vm_runs_and_a_stopped_vm_stays_off() {
    let (cluster, os) = borrower();
    let vm = small_vm(&os);
    let ctx = vm.context().clone();
    let guest = vm.guest().cpu();
    let host = os.id();
    let machine = cluster.machine.clone();
    let seen = cluster.machine.run_task(async move {
        assert!(
            vm.power_on(Vec::new()).await.is_ok(),
            "a running VM powers on"
        );
        ctx.relay(50, 51);
        let mut seen = Vec::new();
        for _ in 0..2 {
            machine.raise_interrupt(host, 50);
            seen.push(guest.interrupt_timeout(51, SimDuration::from_us(50)).await);
        }
        vm.power_off().await.expect("powered off");
        machine.raise_interrupt(host, 50);
        seen.push(guest.interrupt_timeout(51, SimDuration::from_us(50)).await);
        let again = vm.power_on(Vec::new()).await;
        (seen, again)
    });
    let (seen, again) = seen.expect("the task finished");
    assert_eq!(seen, [true, true, false]);
    match again {
        Err(smartio_host::VmError::NotRunning { vm }) => assert_eq!(vm, "borrower/vm0"),
        other => panic!("a stopped VM stays off: {other:?}"),
    }
}
