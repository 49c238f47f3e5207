//! An SR-IOV device assembled: `Machine::functions` names the PF and every VF with its
//! endpoint, the DMA test device's model serves each (a copy engine per VF, reachable as the
//! VF's model), and a device without SR-IOV has its PF only.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_platform::FunctionId;

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../smartio/tests/scenarios/sriov-lending.toml"
);

#[test]
fn the_machine_names_every_function_of_an_sriov_device_and_each_vf_has_its_model() {
    let c = Cluster::new(SCENARIO, &Calibration::default_embedded()).expect("loads");
    let (pf, ntb) = {
        let f = c.machine.fabric();
        let lender = f.host_by_name("lender").expect("lender");
        (
            f.endpoint_by_name(lender, "dma0").expect("dma0"),
            f.endpoint_by_name(lender, "ntb0").expect("ntb0"),
        )
    };
    let functions = c.machine.functions(pf);
    assert_eq!(functions.len(), 9);
    assert_eq!(functions[0], (FunctionId::Physical, pf));
    let vfs = c
        .machine
        .fabric()
        .virtual_functions(pf)
        .expect("a PF")
        .vfs
        .clone();
    for (i, (function, endpoint)) in functions.iter().skip(1).enumerate() {
        assert_eq!(function.vf_number(), Some(i as u16 + 1));
        assert_eq!(*endpoint, vfs[i]);
        let vf = c.copy_engine(*endpoint).expect("the VF's copy engine");
        let pf_engine = c.copy_engine(pf).expect("the PF's");
        assert_eq!(vf.memory_size(), smartio_devices::dma::VF_MEMORY_SIZE);
        assert!(!std::rc::Rc::ptr_eq(&vf, &pf_engine));
    }
    assert_eq!(c.machine.functions(ntb), vec![(FunctionId::Physical, ntb)]);
}
