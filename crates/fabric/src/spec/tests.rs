//! Tests of scenario parsing and validation: structure, and one test per class of bad value
//! (each asserting the file, the line, the key, the value and the allowed range).

use super::*;

const MINIMAL: &str = r#"
name = "t"
[[host]]
name = "a"
ram = "1 GiB"

[[host.switch]]
name = "sw"
chip = "PEX8796"
parent = "root"
link = "gen3 x16"

[[host.device]]
name = "d0"
kind = "dma"
parent = "sw"
link = "gen3 x16"
"#;

#[test]
fn a_minimal_scenario_parses_with_parents_first() {
    let spec = parse_scenario("t.toml", MINIMAL).expect("valid");
    assert_eq!(spec.hosts.len(), 1);
    let h = &spec.hosts[0];
    assert_eq!(h.ram, 1 << 30);
    assert_eq!(h.components[0].name, "sw");
    assert_eq!(h.components[1].parent, Parent::Switch(0));
    assert_eq!(h.components[1].loc.line, 14);
}

#[test]
fn an_unknown_parent_names_file_line_and_parent() {
    let text = MINIMAL.replace("parent = \"sw\"", "parent = \"nope\"");
    let err = parse_scenario("t.toml", &text).expect_err("must fail");
    assert_eq!(err.line, Some(16));
    assert!(err.to_string().starts_with("t.toml:16:"), "{err}");
    assert!(err.message.contains("\"nope\""), "{err}");
}

#[test]
fn a_device_cannot_be_a_parent() {
    let text = format!("{MINIMAL}\n[[host.device]]\nname = \"d1\"\nkind = \"dma\"\nparent = \"d0\"\nlink = \"gen3 x4\"\n");
    let err = parse_scenario("t.toml", &text).expect_err("must fail");
    assert!(err.message.contains("not a switch"), "{err}");
}

#[test]
fn syntax_errors_carry_a_line() {
    let err =
        parse_scenario("bad.toml", "[[host]]\nname = \"a\"\nram = \n").expect_err("must fail");
    assert_eq!(err.file, "bad.toml");
    assert_eq!(err.line, Some(3));
}

#[test]
fn a_number_too_large_for_toml_names_its_key() {
    let text = "[[host]]\nname = \"a\"\nram = 99999999999999999999999\n";
    let err = parse_scenario("big.toml", text).expect_err("must fail");
    assert_eq!(err.line, Some(3));
    assert!(err.message.starts_with("ram: "), "{err}");
}

#[test]
fn unknown_keys_are_rejected() {
    let text = MINIMAL.replace("ram = \"1 GiB\"", "ram = \"1 GiB\"\nrma = 3");
    let err = parse_scenario("t.toml", &text).expect_err("must fail");
    assert!(err.message.contains("rma"), "{err}");
    assert_eq!(err.line, Some(6));
}

#[test]
fn a_bad_link_is_reported_at_its_line() {
    let text = MINIMAL.replace(
        "link = \"gen3 x16\"\n\n[[host.device]]",
        "link = \"gen3 x7\"\n\n[[host.device]]",
    );
    let err = parse_scenario("t.toml", &text).expect_err("must fail");
    assert_eq!(err.line, Some(11));
    assert!(err.message.contains("width"), "{err}");
}

#[test]
fn parent_loops_are_rejected() {
    let text = r#"
[[host]]
name = "a"
ram = "1G"
[[host.switch]]
name = "x"
chip = "c"
parent = "y"
link = "gen3 x16"
[[host.switch]]
name = "y"
chip = "c"
parent = "x"
link = "gen3 x16"
"#;
    let err = parse_scenario("t.toml", text).expect_err("must fail");
    assert!(err.message.contains("loops"), "{err}");
}

#[test]
fn repeated_hosts_expand_names_and_connections() {
    let text = r#"
[[host]]
name = "node{i:02}"
ram = "1G"
repeat = [0, 11]
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "sub{i/10}"

[[cluster_switch]]
name = "sub0"
chip = "PM8536"
[[cluster_switch]]
name = "sub1"
chip = "PM8536"
"#;
    let spec = parse_scenario("t.toml", text).expect("valid");
    assert_eq!(spec.hosts.len(), 12);
    assert_eq!(spec.hosts[11].name, "node11");
    assert_eq!(spec.cables.len(), 12);
    assert_eq!(spec.cables[11].b, CableEnd::ClusterSwitch(1));
    assert_eq!(spec.cables[9].b, CableEnd::ClusterSwitch(0));
}

#[test]
fn cabling_an_adapter_twice_is_an_error() {
    let text = r#"
[[host]]
name = "a"
ram = "1G"
[[host.ntb]]
name = "n"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "b.n"
[[host]]
name = "b"
ram = "1G"
[[host.ntb]]
name = "n"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "a.n"
"#;
    let err = parse_scenario("t.toml", text).expect_err("must fail");
    assert!(err.message.contains("cabled twice"), "{err}");
    assert_eq!(err.line, Some(21));
}

// ---------------------------------------------------------------------------------------------
// Values outside their range: one test per class, each naming file, line, key, value, range
// ---------------------------------------------------------------------------------------------

/// A host with one NTB adapter; line 4 is `ram`, line 10 is `window`.
const NTB: &str = r#"
[[host]]
name = "a"
ram = "1 GiB"
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
"#;

/// Parses `text`, expecting an error at `line` whose text holds every one of `needles`.
fn rejected(text: &str, line: usize, needles: &[&str]) {
    let Err(err) = parse_scenario("t.toml", text) else {
        panic!("accepted, but expected {needles:?}")
    };
    let shown = err.to_string();
    assert_eq!(err.line, Some(line), "{shown}");
    assert!(shown.starts_with(&format!("t.toml:{line}: ")), "{shown}");
    for needle in needles {
        assert!(shown.contains(needle), "{shown:?} lacks {needle:?}");
    }
}

#[test]
fn the_minimal_ntb_host_parses() {
    let spec = parse_scenario("t.toml", NTB).expect("valid");
    assert_eq!(spec.hosts[0].ram, 1 << 30);
}

#[test]
fn a_ram_size_near_2_to_the_64_is_rejected_before_it_can_wrap_the_address_map() {
    for (value, needle) in [
        (
            "\"18446744073709551615\"",
            "host \"a\": ram = \"18446744073709551615\": too large for the host address map \
             (allowed: 1G to 1024T)",
        ),
        (
            "9223372036854775807",
            "ram = 9223372036854775807: too large for the host address map",
        ),
        ("\"1025T\"", "ram = \"1025T\": too large"),
        ("\"1M\"", "ram = \"1M\": too small (allowed: 1G to 1024T)"),
        (
            "1073741823",
            "ram = 1073741823: too small (allowed: 1G to 1024T)",
        ),
    ] {
        rejected(
            &NTB.replace("ram = \"1 GiB\"", &format!("ram = {value}")),
            4,
            &[needle],
        );
    }
    let largest = NTB.replace("ram = \"1 GiB\"", "ram = \"1024T\"");
    assert_eq!(
        parse_scenario("t.toml", &largest).expect("1 PiB").hosts[0].ram,
        1 << 50
    );
}

#[test]
fn a_host_may_say_where_its_firmware_starts_64_bit_mmio() {
    let spec = parse_scenario("t.toml", NTB).expect("valid");
    assert_eq!(
        spec.hosts[0].mmio64, None,
        "unless it says, the 1 TiB boundary"
    );
    let low = NTB.replace("ram = \"1 GiB\"", "ram = \"1 GiB\"\nmmio64 = \"8 GiB\"");
    let spec = parse_scenario("t.toml", &low).expect("valid");
    assert_eq!(spec.hosts[0].mmio64, Some(8 << 30));
    for (value, needle) in [
        (
            "\"2 GiB\"",
            "host \"a\": mmio64 = \"2 GiB\": below the top of RAM (1G of RAM ends at 4G)",
        ),
        ("\"4097M\"", "mmio64 = \"4097M\": not a multiple of 1 GiB"),
        ("\"2040T\"", "mmio64 = \"2040T\": too high"),
        ("-1", "mmio64 = -1: a size cannot be negative"),
    ] {
        rejected(
            &NTB.replace(
                "ram = \"1 GiB\"",
                &format!("ram = \"1 GiB\"\nmmio64 = {value}"),
            ),
            5,
            &[needle],
        );
    }
}

#[test]
fn a_size_that_overflows_64_bits_is_an_error_with_its_text() {
    rejected(
        &NTB.replace("ram = \"1 GiB\"", "ram = \"18446744073709551616\""),
        4,
        &["ram: size \"18446744073709551616\": too large (at most 18446744073709551615 bytes)"],
    );
    rejected(
        &NTB.replace("window = \"1G\"", "window = \"99999999999T\""),
        10,
        &["window: size \"99999999999T\": too large"],
    );
}

#[test]
fn a_size_of_the_wrong_type_says_what_a_size_is() {
    for (value, needle) in [
        (
            "1.5",
            "ram = 1.5: expected a size — a number of bytes or a string such as \"64G\"",
        ),
        ("true", "ram = true: expected a size"),
        ("[1]", "ram = [1]: expected a size"),
        ("-5", "ram = -5: a size cannot be negative"),
    ] {
        let text = NTB.replace("ram = \"1 GiB\"", &format!("ram = {value}"));
        rejected(&text, 4, &[needle]);
        let err = parse_scenario("t.toml", &text).expect_err(value);
        assert!(!err.message.contains("untagged"), "{err}");
    }
}

#[test]
fn ntb_windows_must_be_powers_of_two_from_1_mib_to_8_tib() {
    for (value, problem) in [
        ("\"3M\"", "not a power of two"),
        ("\"512K\"", "too small"),
        ("\"16T\"", "too large"),
        ("0", "not a power of two"),
    ] {
        rejected(
            &NTB.replace("window = \"1G\"", &format!("window = {value}")),
            10,
            &[
                &format!("NTB \"ntb0\": window = {value}: {problem}"),
                "(allowed: a power of two from 1M to 8T)",
            ],
        );
    }
    let largest = NTB.replace("window = \"1G\"", "window = \"8T\"");
    assert!(parse_scenario("t.toml", &largest).is_ok());
}

#[test]
fn lut_entries_of_zero_or_too_many_for_the_window_are_rejected_not_clamped() {
    let with = |extra: &str| NTB.replace("window = \"1G\"", &format!("window = \"1G\"\n{extra}"));
    rejected(
        &with("lut_entries = 0"),
        11,
        &["NTB \"ntb0\": lut_entries = 0: too small (allowed: 1 to 4096)"],
    );
    rejected(
        &with("lut_entries = 4097"),
        11,
        &["lut_entries = 4097: too large (allowed: 1 to 4096)"],
    );
    rejected(
        &NTB.replace("window = \"1G\"", "window = \"1M\"\nlut_entries = 512"),
        11,
        &[
            "lut_entries = 512 splits window = \"1M\" into entries of 2048 bytes: too small",
            "(allowed: entries of at least 4096 bytes, so at most 256 entries for this window)",
        ],
    );
    let fits = NTB.replace("window = \"1G\"", "window = \"1M\"\nlut_entries = 256");
    let spec = parse_scenario("t.toml", &fits).expect("4 KiB entries");
    let ComponentKind::Ntb(ntb) = &spec.hosts[0].components[0].kind else {
        panic!("an NTB")
    };
    assert_eq!(ntb.lut_entries, Some(256));
}

#[test]
fn requester_ids_below_the_cpus_reserved_pair_are_rejected() {
    for (value, problem) in [
        ("1", "too small"),
        ("-1", "too small"),
        ("1025", "too large"),
    ] {
        rejected(
            &NTB.replace(
                "window = \"1G\"",
                &format!("window = \"1G\"\nrequester_ids = {value}"),
            ),
            11,
            &[
                &format!("NTB \"ntb0\": requester_ids = {value}: {problem}"),
                "(the host CPU holds two reserved entries) (allowed: 2 to 1024)",
            ],
        );
    }
}

#[test]
fn cluster_switch_ports_of_zero_or_a_huge_number_are_rejected() {
    for (value, problem) in [
        ("0", "too small"),
        ("100000", "too large"),
        ("-3", "too small"),
    ] {
        let text = format!(
            "{NTB}connect = \"sw\"\n[[cluster_switch]]\nname = \"sw\"\nchip = \"PM8536\"\nports = {value}\n"
        );
        rejected(
            &text,
            15,
            &[&format!(
                "cluster switch \"sw\": ports = {value}: {problem} (allowed: 1 to 256)"
            )],
        );
    }
}

#[test]
fn repeat_needs_exactly_two_ordered_indices() {
    let with = |repeat: &str| {
        NTB.replace("name = \"a\"", "name = \"a{i}\"").replace(
            "ram = \"1 GiB\"",
            &format!("ram = \"1 GiB\"\nrepeat = {repeat}"),
        )
    };
    rejected(
        &with("[0, 1, 2]"),
        5,
        &[
            "repeat = [0, 1, 2]: 3 indices, expected two",
            "(allowed: [first, last] with 0 <= first <= last <= 4294967295)",
        ],
    );
    rejected(&with("[3]"), 5, &["repeat = [3]: 1 indices, expected two"]);
    rejected(
        &with("[5, 2]"),
        5,
        &["repeat = [5, 2]: the first index is larger than the last"],
    );
    rejected(
        &with("[-1, 2]"),
        5,
        &["repeat = [-1, 2]: an index is outside"],
    );
    let spec = parse_scenario("t.toml", &with("[7, 9]")).expect("three hosts");
    let names: Vec<_> = spec.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["a7", "a8", "a9"]);
}

#[test]
fn more_hosts_than_the_limit_are_refused_before_any_is_built() {
    let with = |repeat: &str| {
        NTB.replace("name = \"a\"", "name = \"a{i}\"").replace(
            "ram = \"1 GiB\"",
            &format!("ram = \"1 GiB\"\nrepeat = {repeat}"),
        )
    };
    rejected(
        &with("[0, 4294967295]"),
        5,
        &["4294967296 hosts so far (4294967296 from this entry): too many (allowed: at most 10000 hosts in a scenario)"],
    );
    rejected(&with("[0, 10000]"), 5, &["10001 hosts so far", "too many"]);
    rejected(
        &format!(
            "{}\n{}",
            with("[0, 9999]"),
            NTB.replace("name = \"a\"", "name = \"b\"")
        ),
        15,
        &["10001 hosts so far (1 from this entry): too many"],
    );
}

#[test]
fn a_name_template_with_a_huge_width_or_an_unknown_field_is_an_error() {
    let with = |name: &str| {
        NTB.replace("name = \"a\"", &format!("name = \"{name}\""))
            .replace("ram = \"1 GiB\"", "ram = \"1 GiB\"\nrepeat = [0, 1]")
    };
    rejected(
        &with("a{i:99999999}"),
        3,
        &["name = \"a{i:99999999}\": width \"99999999\" in {i:99999999} is not a number from 0 to 10"],
    );
    rejected(
        &with("a{n}"),
        3,
        &["name = \"a{n}\": unknown placeholder {n} (allowed: {i}, {i:02} or {i/10})"],
    );
    rejected(
        &NTB.replace("name = \"a\"", "name = \"a{i}\""),
        3,
        &["the character '{' is not allowed (a name template needs `repeat = [first, last]`)"],
    );
}

#[test]
fn names_with_control_characters_separators_or_nothing_are_rejected() {
    for (name, needle) in [
        (
            "a\\u0000b",
            "host name \"a\\0b\": the character '\\0' is not allowed",
        ),
        ("a\\tb", "the character '\\t' is not allowed"),
        ("", "host name \"\": empty"),
        ("lender:x", "the character ':' is not allowed"),
        ("host/vm", "the character '/' is not allowed"),
    ] {
        rejected(
            &NTB.replace("name = \"a\"", &format!("name = \"{name}\"")),
            3,
            &[
                needle,
                "(allowed: 1 to 64 of letters A-Z a-z, digits 0-9, '-' and '_')",
            ],
        );
    }
    rejected(
        &NTB.replace("name = \"ntb0\"", "name = \"n:0\""),
        6,
        &["component name \"n:0\": the character ':' is not allowed"],
    );
    rejected(
        &NTB.replace("name = \"ntb0\"", "name = \"root\""),
        6,
        &["component name \"root\": reserved for the root ports"],
    );
    let text = format!("{NTB}[[cluster_switch]]\nname = \"s/w\"\nchip = \"PM8536\"\n");
    rejected(
        &text,
        12,
        &["cluster switch name \"s/w\": the character '/' is not allowed"],
    );
}

#[test]
fn cores_and_component_counts_are_bounded() {
    for (value, problem) in [("0", "too small"), ("5000", "too large")] {
        rejected(
            &NTB.replace(
                "ram = \"1 GiB\"",
                &format!("ram = \"1 GiB\"\ncores = {value}"),
            ),
            5,
            &[&format!(
                "host \"a\": cores = {value}: {problem} (allowed: 1 to 1024)"
            )],
        );
    }
    let mut text = String::from("[[host]]\nname = \"a\"\nram = \"1G\"\n");
    for i in 0..257 {
        text += &format!(
            "[[host.device]]\nname = \"d{i}\"\nkind = \"dma\"\nparent = \"root\"\nlink = \"gen3 x4\"\n"
        );
    }
    rejected(
        &text,
        2,
        &["host \"a\": 257 components: too many (allowed: at most 256, as each needs a PCI bus of its own)"],
    );
}

#[test]
fn a_bad_link_or_cable_names_its_key_and_the_allowed_forms() {
    rejected(
        &NTB.replace("link = \"gen3 x16\"", "link = \"gen6 x16\""),
        9,
        &["link = \"gen6 x16\": generation 6 is not a PCIe generation the model knows (allowed: \"genG xW\""],
    );
    rejected(
        &format!("{NTB}connect = \"sw\"\ncable = \"gen3 x12\"\n[[cluster_switch]]\nname = \"sw\"\nchip = \"PM8536\"\n"),
        12,
        &["cable = \"gen3 x12\": width x12 is not a PCIe link width"],
    );
}

#[test]
fn a_scenario_name_or_description_with_control_characters_is_rejected() {
    rejected(
        &format!("name = \"a\\u0007b\"\n{NTB}"),
        1,
        &["name = \"a\\u{7}b\": the control character '\\u{7}' is not allowed (allowed: one line of printable text)"],
    );
    rejected(
        &format!("description = \"two\\nlines\"\n{NTB}"),
        1,
        &["description = \"two\\nlines\": the control character '\\n' is not allowed"],
    );
    let spec = parse_scenario("t.toml", &format!("name = \"ok – µ\"\n{NTB}")).expect("printable");
    assert_eq!(spec.name, "ok – µ");
}

/// `MINIMAL` with VMs on host `a` (1 GiB of RAM).
fn with_vms(vms: &str) -> String {
    format!("{MINIMAL}\n{vms}")
}

#[test]
fn vms_parse_with_memory_and_pages_and_default_to_4_kib_pages() {
    let text = with_vms(
        r#"
[[host.vm]]
name = "vm0"
memory = "512 MiB"
pages = "2 MiB"

[[host.vm]]
name = "vm1"
memory = "64 MiB"
"#,
    );
    let spec = parse_scenario("t.toml", &text).expect("valid");
    let vms = &spec.hosts[0].vms;
    assert_eq!(vms.len(), 2);
    assert_eq!(
        (vms[0].name.as_str(), vms[0].memory, vms[0].page_bytes),
        ("vm0", 512 << 20, 2 << 20)
    );
    assert_eq!((vms[1].memory, vms[1].page_bytes), (64 << 20, 4096));
    assert_eq!(vms[1].loc.line, 26, "the line of vm1's name");
}

#[test]
fn bad_vm_entries_name_the_line_the_value_and_what_is_allowed() {
    let cases = [
        (
            "[[host.vm]]\nname = \"vm0\"\nmemory = \"2 GiB\"\n",
            "memory = \"2 GiB\": not a whole number of pages of 4K within the host's RAM (allowed: 4K to 1G in steps of 4K)",
        ),
        (
            "[[host.vm]]\nname = \"vm0\"\nmemory = \"3 MiB\"\npages = \"2 MiB\"\n",
            "memory = \"3 MiB\": not a whole number of pages of 2M",
        ),
        (
            "[[host.vm]]\nname = \"vm0\"\nmemory = \"0\"\n",
            "memory = \"0\": not a whole number of pages",
        ),
        (
            "[[host.vm]]\nname = \"vm0\"\nmemory = \"64 MiB\"\npages = \"1 GiB\"\n",
            "pages = \"1 GiB\": not a page size VM memory can be backed with (allowed: 4 KiB or 2 MiB)",
        ),
        (
            "[[host.vm]]\nname = \"vm0\"\nmemory = \"4 MiB\"\n[[host.vm]]\nname = \"vm0\"\nmemory = \"4 MiB\"\n",
            "host \"a\": a second VM named \"vm0\"",
        ),
        (
            "[[host.vm]]\nname = \"\"\nmemory = \"4 MiB\"\n",
            "VM name",
        ),
        (
            "[[host.vm]]\nname = \"vm0\"\nmemory = \"4 MiB\"\ncpus = 2\n",
            "cpus",
        ),
    ];
    for (vms, expected) in cases {
        let err = parse_scenario("t.toml", &with_vms(vms)).expect_err(vms);
        let message = err.to_string();
        assert!(message.starts_with("t.toml:"), "{message}");
        assert!(message.contains(expected), "{vms}\n→ {message}");
    }
}

#[test]
fn more_than_64_vms_on_a_host_are_refused() {
    let vms: String = (0..=limits::MAX_VMS)
        .map(|i| format!("[[host.vm]]\nname = \"vm{i}\"\nmemory = \"4 MiB\"\n"))
        .collect();
    let err = parse_scenario("t.toml", &with_vms(&vms)).expect_err("too many");
    assert!(
        err.to_string()
            .contains("65 VMs: too many (allowed: at most 64)"),
        "{err}"
    );
}

#[test]
fn a_vm_lists_the_devices_passed_through_to_it_with_their_lines() {
    let text =
        with_vms("[[host.vm]]\nname = \"vm0\"\nmemory = \"4 MiB\"\ndevices = [\"d0\", \"a:d0\"]\n");
    let spec = parse_scenario("t.toml", &text).expect("valid");
    let devices: Vec<&str> = spec.hosts[0].vms[0]
        .devices
        .iter()
        .map(|(d, _)| d.as_str())
        .collect();
    assert_eq!(devices, ["d0", "a:d0"]);
    assert_eq!(spec.hosts[0].vms[0].devices[0].1.line, 22);
}

#[test]
fn vm_devices_that_are_malformed_repeated_too_many_or_missing_are_refused_at_their_line() {
    let many: Vec<String> = (0..=limits::MAX_VM_DEVICES)
        .map(|i| format!("\"d{i}\""))
        .collect();
    let many = format!("[{}]", many.join(", "));
    let cases = [
        (
            "[\"a:b:c\"]",
            "devices entry \"a:b:c\": write a device of the host (nvme0, or a virtual \
             function: nic0.vf1) or lender:device",
        ),
        (
            "[\"d0.vf0\"]",
            "devices entry \"d0.vf0\": virtual function \"0\"",
        ),
        ("[\"a:d0.vf01\"]", "virtual function \"01\": not a number"),
        ("[\"d0.pf1\"]", "devices entry \"d0.pf1\": write a device"),
        (
            "[\"d9.vf1\"]",
            "VM a/vm0: \"d9.vf1\": host a has no device \"d9\" (its devices: d0)",
        ),
        ("[\":d0\"]", "devices entry \":d0\""),
        ("[\"a:\"]", "devices entry \"a:\""),
        ("[\"d0\", \"d0\"]", "VM a/vm0: \"d0\" is listed twice"),
        (&many, "17 devices: too many (allowed: at most 16)"),
        (
            "[\"nvme9\"]",
            "VM a/vm0: \"nvme9\": host a has no device \"nvme9\" (its devices: d0)",
        ),
        ("[\"b:d0\"]", "VM a/vm0: \"b:d0\": no host \"b\" (hosts: a)"),
        ("[1]", "devices"),
    ];
    for (list, expected) in cases {
        let vms = format!("[[host.vm]]\nname = \"vm0\"\nmemory = \"4 MiB\"\ndevices = {list}\n");
        let err = parse_scenario("t.toml", &with_vms(&vms)).expect_err(list);
        let message = err.to_string();
        assert!(message.starts_with("t.toml:22:"), "{list}\n→ {message}");
        assert!(message.contains(expected), "{list}\n→ {message}");
    }
}

#[test]
fn a_scenario_may_configure_mps_and_mrrs_and_each_is_remembered_with_its_line() {
    let text =
        format!("{MINIMAL}\n[pcie]\nmax_payload_size = 128\nmax_read_request_size = \"1K\"\n");
    let spec = parse_scenario("t.toml", &text).expect("valid");
    let mps = spec.pcie.max_payload_size.expect("given");
    assert_eq!((mps.bytes, mps.loc.line), (128, 20));
    let mrrs = spec.pcie.max_read_request_size.expect("given");
    assert_eq!((mrrs.bytes, mrrs.loc.line), (1024, 21));
    let none = parse_scenario("t.toml", MINIMAL).expect("valid");
    assert_eq!(none.pcie, PcieSpec::default(), "the calibration's apply");
}

#[test]
fn a_configured_size_outside_the_device_control_encodings_is_refused() {
    for (value, problem) in [
        ("192", "not a power of two"),
        ("64", "too small"),
        ("8192", "too large"),
        ("0", "not a power of two"),
    ] {
        let text = format!("{MINIMAL}\n[pcie]\nmax_payload_size = {value}\n");
        let err = parse_scenario("t.toml", &text).expect_err("must fail");
        assert_eq!(
            err.to_string(),
            format!(
                "t.toml:20: [pcie] max_payload_size = {value}: {problem} (allowed: a power of \
                 two from 128 to 4K)"
            )
        );
    }
    let text = format!("{MINIMAL}\n[pcie]\nmax_read_request_size = -512\n");
    let err = parse_scenario("t.toml", &text).expect_err("must fail");
    assert_eq!(err.line, Some(20));
    assert!(err.message.contains("max_read_request_size"), "{err}");
    let text = format!("{MINIMAL}\n[pcie]\nread_completion_boundary = 128\n");
    let err = parse_scenario("t.toml", &text).expect_err("must fail");
    assert!(err.message.contains("read_completion_boundary"), "{err}");
}

#[test]
fn a_cabled_switch_link_is_marked_and_a_non_boolean_is_refused_with_its_line() {
    let text = MINIMAL.replace(
        "parent = \"root\"\nlink = \"gen3 x16\"",
        "parent = \"root\"\nlink = \"gen3 x16\"\ncabled = true",
    );
    let spec = parse_scenario("t.toml", &text).expect("valid");
    assert!(spec.hosts[0].components[0].cabled, "sw's link is a cable");
    assert!(!spec.hosts[0].components[1].cabled, "d0's link is a trace");
    let bad = text.replace("cabled = true", "cabled = \"yes\"");
    let err = parse_scenario("t.toml", &bad).expect_err("must fail");
    assert_eq!(err.line, Some(12), "{err}");
    assert!(err.message.contains("cabled"), "{err}");
}

#[test]
fn a_devices_fdid_is_kept_and_must_be_in_range_and_its_own() {
    let with =
        |fdid: &str| MINIMAL.replace("kind = \"dma\"", &format!("kind = \"dma\"\nfdid = {fdid}"));
    let spec = parse_scenario("t.toml", &with("0xc0c00")).expect("valid");
    assert!(matches!(
        spec.hosts[0].components[1].kind,
        ComponentKind::Device {
            fdid: Some(0xc0c00),
            ..
        }
    ));
    let plain = parse_scenario("t.toml", MINIMAL).expect("valid");
    assert!(matches!(
        plain.hosts[0].components[1].kind,
        ComponentKind::Device { fdid: None, .. }
    ));
    rejected(
        &with("0"),
        16,
        &["device \"d0\": fdid = 0: too small (allowed: 1 to 4294967295)"],
    );
    rejected(
        &with("0x100000000"),
        16,
        &["fdid = 4294967296: too large (allowed: 1 to 4294967295)"],
    );
    let twice = format!(
        "{}\n[[host.device]]\nname = \"d1\"\nkind = \"dma\"\nparent = \"sw\"\nlink = \"gen3 x16\"\nfdid = 7\n",
        with("7")
    );
    rejected(
        &twice,
        25,
        &["device \"d1\": fdid = 0x7 is already device \"d0\"'s"],
    );
}
