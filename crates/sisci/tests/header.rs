//! The C headers say what the library does: every `SCI_ERR_*` value the library or the
//! daemon returns is the header's value of that name.

use smartio_smartio::SciErrorClass;

/// `SCI_ERR_NAME = (0xNNN | SCI_ERR_MASK)` lines of sisci_error.h, as (name, value).
fn header_codes() -> Vec<(String, u32)> {
    let text = sisci::HEADERS
        .iter()
        .find(|(path, _)| path.ends_with("sisci_error.h"))
        .map(|(_, text)| *text)
        .expect("sisci_error.h is installed");
    let mask: u32 = 0x4000_0000;
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().trim_end_matches(',').split_once('=')?;
            let name = name.trim();
            if !name.starts_with("SCI_ERR_") {
                return None;
            }
            let value = value.trim();
            let code = if value == "0x000" {
                0
            } else {
                let hex = value.strip_prefix("(0x")?.split_whitespace().next()?;
                mask | u32::from_str_radix(hex, 16).ok()?
            };
            Some((name.to_string(), code))
        })
        .collect()
}

fn value_of(name: &str) -> u32 {
    header_codes()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} is not in sisci_error.h"))
        .1
}

#[test]
fn every_daemon_error_class_has_the_headers_value() {
    use SciErrorClass as C;
    let classes = [
        C::Busy,
        C::Nospc,
        C::HwNospc,
        C::NoSuchAdapterNo,
        C::Timeout,
        C::OutOfRange,
        C::NoSuchSegment,
        C::ConnectionRefused,
        C::IllegalParameter,
        C::SegmentNotPrepared,
        C::SizeAlignment,
        C::IllegalAddress,
        C::IllegalOperation,
        C::SegmentIdUsed,
        C::NotConnected,
        C::NoSuchNodeId,
        C::TransferFailed,
        C::NoSuchFdid,
        C::NotAvailable,
    ];
    for class in classes {
        assert_eq!(class.code(), value_of(class.name()), "{}", class.name());
        // SCIGetErrorString names every code the daemon answers with.
        assert!(
            sisci::code::describe(class.code()).starts_with(class.name()),
            "SCIGetErrorString({}) is {:?}",
            class.name(),
            sisci::code::describe(class.code())
        );
    }
}

#[test]
fn the_librarys_own_errors_have_the_headers_values() {
    use sisci::code;
    for (name, value) in [
        ("SCI_ERR_OK", code::OK),
        ("SCI_ERR_BUSY", code::BUSY),
        ("SCI_ERR_ILLEGAL_FLAG", code::ILLEGAL_FLAG),
        ("SCI_ERR_NOT_IMPLEMENTED", code::NOT_IMPLEMENTED),
        ("SCI_ERR_TIMEOUT", code::TIMEOUT),
        ("SCI_ERR_OUT_OF_RANGE", code::OUT_OF_RANGE),
        ("SCI_ERR_NO_SUCH_SEGMENT", code::NO_SUCH_SEGMENT),
        ("SCI_ERR_CONNECTION_REFUSED", code::CONNECTION_REFUSED),
        ("SCI_ERR_ILLEGAL_PARAMETER", code::ILLEGAL_PARAMETER),
        ("SCI_ERR_ILLEGAL_QUERY", code::ILLEGAL_QUERY),
        ("SCI_ERR_SYSTEM", code::SYSTEM),
        ("SCI_ERR_NOT_INITIALIZED", code::NOT_INITIALIZED),
        ("SCI_ERR_SIZE_ALIGNMENT", code::SIZE_ALIGNMENT),
        ("SCI_ERR_ILLEGAL_ADDRESS", code::ILLEGAL_ADDRESS),
        ("SCI_ERR_ILLEGAL_OPERATION", code::ILLEGAL_OPERATION),
        ("SCI_ERR_NO_SUCH_FDID", code::NO_SUCH_FDID),
        ("SCI_ERR_NOT_AVAILABLE", code::NOT_AVAILABLE),
    ] {
        assert_eq!(value, value_of(name), "{name}");
        assert!(
            code::describe(value).starts_with(name),
            "SCIGetErrorString of {name} names it"
        );
    }
}

#[test]
fn names_with_one_value_are_the_ones_sisci_gives_one_value() {
    let codes = header_codes();
    assert!(codes.len() >= 40, "{codes:?}");
    for (i, (a, va)) in codes.iter().enumerate() {
        for (b, vb) in &codes[i + 1..] {
            let alias =
                [a.as_str(), b.as_str()] == ["SCI_ERR_NO_SUCH_SEGMENT", "SCI_ERR_NO_SUCH_INTNO"];
            assert!(va != vb || alias, "{a} and {b} share {va:#x}");
        }
    }
}

#[test]
fn dis_max_nscis_is_the_daemons_limit_of_adapters_per_host() {
    let text = sisci::HEADERS
        .iter()
        .find(|(path, _)| path.ends_with("dis/dis_types.h"))
        .map(|(_, text)| *text)
        .expect("dis/dis_types.h is installed");
    let value: u32 = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("#define DIS_MAX_NSCIS "))
        .and_then(|v| v.trim().parse().ok())
        .expect("DIS_MAX_NSCIS is defined as a number");
    assert_eq!(value, smartio_live::protocol::MAX_ADAPTERS);
}
