//! The allowed range of every scenario value, with the reason for each bound, and the checks
//! that apply them. Messages have the form `key = value: why (allowed: range)`; the caller
//! prefixes the entity (`host "a": `) and the file and line.

use crate::adapter::CPU_RESERVED_REQUESTER_IDS;
use crate::address_map::{ram_top, MAX_RAM, MIN_RAM, MMIO64_GRANULE, MMIO64_MAX_BASE};
use crate::units::format_size;
use std::fmt::Display;
use std::ops::RangeInclusive;
use thiserror::Error;

/// Why a scenario value is refused: `key = value: why (allowed: range)` (a name: `what
/// "name": why (allowed: ...)`). The caller prefixes the entity and the file and line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LimitError {
    /// An empty name.
    #[error("{what} \"\": empty (allowed: {allowed})", allowed = name_allowed())]
    EmptyName {
        /// Which name (`host name`).
        what: String,
    },
    /// A name longer than [`MAX_NAME_LEN`].
    #[error("{what} {name:?}: {chars} characters is too long (allowed: {allowed})", allowed = name_allowed())]
    LongName {
        /// Which name.
        what: String,
        /// The name.
        name: String,
        /// Its length in characters.
        chars: usize,
    },
    /// A character outside [`NAME_CHARACTERS`].
    #[error("{what} {name:?}: the character {character:?} is not allowed{hint} (allowed: {allowed})", hint = template_hint(*character), allowed = name_allowed())]
    NameCharacter {
        /// Which name.
        what: String,
        /// The name.
        name: String,
        /// The first character not allowed.
        character: char,
    },
    /// A value outside its range (or not of the form the range asks for).
    #[error("{key} = {value}: {problem}{why} (allowed: {allowed})")]
    OutOfRange {
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// `too small`, `too large`, `not a power of two`, ...
        problem: &'static str,
        /// The reason for the bound, if the message gives it (` (the host CPU holds ...)`).
        why: String,
        /// What is allowed (`1 to 1024`, `a power of two from 1M to 8T`).
        allowed: String,
    },
}

/// What a name may be, as [`LimitError`] messages say it.
fn name_allowed() -> String {
    format!("1 to {MAX_NAME_LEN} of {NAME_CHARACTERS}")
}

/// The hint for a `{` in a name: it looks like a template.
fn template_hint(c: char) -> &'static str {
    if c == '{' {
        " (a name template needs `repeat = [first, last]`)"
    } else {
        ""
    }
}

/// Hosts in one scenario, repeated hosts included. Published PCIe clusters have tens of hosts
/// (the papers' largest is 60); ten thousand is far beyond them yet still builds in seconds.
pub const MAX_HOSTS: u64 = 10_000;

/// Cluster switches in one scenario (the fabric keeps a path tree per switch: `S²` hops).
pub const MAX_CLUSTER_SWITCHES: usize = 1024;

/// Components (switches, devices, adapters) in one host: each needs its own PCI bus at
/// least, and a host has 256 buses.
pub const MAX_COMPONENTS: usize = 256;

/// Virtual machines on one host: each holds guest RAM of its own, and the papers' hosts ran
/// one or two; 64 leaves room for consolidation studies.
pub const MAX_VMS: usize = 64;

/// Functions passed through to one VM: the slots of a guest's PCI bus leave room for 32; the
/// papers' VMs had one or two.
pub const MAX_VM_DEVICES: usize = 16;

/// The host page sizes that may back a VM's memory: 4 KiB pages, or 2 MiB huge pages.
pub const VM_PAGE_SIZES: [u64; 2] = [4 << 10, 2 << 20];

/// CPU cores of a host: more than any two-socket server has today (2 × 192).
pub const CORES: RangeInclusive<i64> = 1..=1024;

/// RAM of a host ([`MIN_RAM`] to [`MAX_RAM`]).
pub const RAM: RangeInclusive<u64> = MIN_RAM..=MAX_RAM;

/// An NTB adapter's window BAR: a power of two from 1 MiB (a useful mapping) to 8 TiB (half
/// the 16 TiB 64-bit MMIO region of a host, which also holds the other BARs).
pub const WINDOW: RangeInclusive<u64> = 1 << 20..=8 << 40;

/// Look-up-table entries of an adapter: at least one; PEX87xx and Switchtec chips have tens
/// to hundreds, and the model keeps one slot per entry.
pub const LUT_ENTRIES: RangeInclusive<i64> = 1..=4096;

/// A device's SmartIO id (fdid) chosen by the scenario: any non-zero 32-bit number (SISCI's
/// `SCIBorrowDevice` and friends take it as an `unsigned int`; 0 is no device).
pub const FDID: RangeInclusive<i64> = 1..=u32::MAX as i64;

/// The smallest look-up-table entry: one 4 KiB page (IOMMU and segment mappings are
/// page-granular).
pub const MIN_ENTRY_SIZE: u64 = 4096;

/// Requester-id entries of an adapter: the host CPU's two reserved ones at least.
pub const REQUESTER_IDS: RangeInclusive<i64> = CPU_RESERVED_REQUESTER_IDS as i64..=1024;

/// Max_Payload_Size and Max_Read_Request_Size (`[pcie]`): 3-bit encodings of the Device
/// Control register, 128 B to 4096 B in powers of two (PCIe base spec §7.5.3.4).
pub const TLP_SIZE: RangeInclusive<u64> = 128..=4096;

/// Ports of a cluster switch: PCIe switch chips have at most about a hundred lanes (the
/// PM8536 has 96); 256 leaves room for imagined larger boxes.
pub const SWITCH_PORTS: RangeInclusive<i64> = 1..=256;

/// Longest name of a host, component or cluster switch.
pub const MAX_NAME_LEN: usize = 64;

/// Widest zero-padded index in a name template (`u32::MAX` has 10 digits).
pub const MAX_TEMPLATE_WIDTH: usize = 10;

/// The characters a name may hold. `:` and `/` are taken by the command line (`lender:device`,
/// a future `host/vm`), `.` by `host.component`, and control characters and spaces would make
/// tables and messages ambiguous.
pub const NAME_CHARACTERS: &str = "letters A-Z a-z, digits 0-9, '-' and '_'";

/// Checks a host, component or cluster switch name; `what` says which (`host name`).
pub fn check_name(what: &str, name: &str) -> Result<(), LimitError> {
    if name.is_empty() {
        return Err(LimitError::EmptyName {
            what: what.to_string(),
        });
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_LEN {
        return Err(LimitError::LongName {
            what: what.to_string(),
            name: name.to_string(),
            chars,
        });
    }
    if let Some(character) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(LimitError::NameCharacter {
            what: what.to_string(),
            name: name.to_string(),
            character,
        });
    }
    Ok(())
}

/// `key = value: too small/too large (allowed: a to b)` unless `value` is in `range`.
pub fn in_range<T: PartialOrd + Display>(
    key: &str,
    value: T,
    range: &RangeInclusive<T>,
    why: &str,
) -> Result<T, LimitError> {
    let problem = if value < *range.start() {
        "too small"
    } else if value > *range.end() {
        "too large"
    } else {
        return Ok(value);
    };
    Err(LimitError::OutOfRange {
        key: key.to_string(),
        value: value.to_string(),
        problem,
        why: why.to_string(),
        allowed: format!("{} to {}", range.start(), range.end()),
    })
}

/// A size in `range` that is a power of two; `shown` is the value as written.
pub fn power_of_two_size(
    key: &str,
    shown: &str,
    bytes: u64,
    range: &RangeInclusive<u64>,
) -> Result<u64, LimitError> {
    let problem = if !bytes.is_power_of_two() {
        "not a power of two"
    } else if bytes < *range.start() {
        "too small"
    } else if bytes > *range.end() {
        "too large"
    } else {
        return Ok(bytes);
    };
    Err(LimitError::OutOfRange {
        key: key.to_string(),
        value: shown.to_string(),
        problem,
        why: String::new(),
        allowed: format!(
            "a power of two from {} to {}",
            format_size(*range.start()),
            format_size(*range.end())
        ),
    })
}

/// A host's RAM in [`RAM`]; `shown` is the value as written.
pub fn ram(shown: &str, bytes: u64) -> Result<u64, LimitError> {
    if RAM.contains(&bytes) {
        return Ok(bytes);
    }
    let problem = if bytes < *RAM.start() {
        "too small"
    } else {
        "too large for the host address map"
    };
    Err(LimitError::OutOfRange {
        key: "ram".to_string(),
        value: shown.to_string(),
        problem,
        why: String::new(),
        allowed: format!(
            "{} to {}",
            format_size(*RAM.start()),
            format_size(*RAM.end())
        ),
    })
}

/// Where a host's firmware starts its 64-bit MMIO region (`mmio64`), for a host with `ram`
/// bytes: a multiple of 1 GiB (firmware sets the region's base in such units), at or above
/// the top of RAM (RAM above the first 2 GiB continues from 4 GiB, and no BAR may overlap
/// it), and at most [`MMIO64_MAX_BASE`] (the 16 TiB region then ends at 2^51, inside
/// x86-64's 52-bit physical address space); `shown` is the value as written.
pub fn mmio64(shown: &str, bytes: u64, ram: u64) -> Result<u64, LimitError> {
    let top = ram_top(ram).unwrap_or(u64::MAX);
    let (problem, why) = if bytes < top {
        (
            "below the top of RAM",
            format!(
                " ({} of RAM ends at {})",
                format_size(ram),
                format_size(top)
            ),
        )
    } else if bytes > MMIO64_MAX_BASE {
        (
            "too high",
            " (its 16 TiB would end beyond x86-64's 52-bit physical addresses)".to_string(),
        )
    } else if !bytes.is_multiple_of(MMIO64_GRANULE) {
        ("not a multiple of 1 GiB", String::new())
    } else {
        return Ok(bytes);
    };
    Err(LimitError::OutOfRange {
        key: "mmio64".to_string(),
        value: shown.to_string(),
        problem,
        why,
        allowed: format!(
            "a multiple of 1G from {} to {}",
            format_size(top.min(MMIO64_MAX_BASE)),
            format_size(MMIO64_MAX_BASE)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_64_bit_mmio_base_lies_above_ram_on_a_gib_boundary() {
        assert_eq!(mmio64("\"128G\"", 128 << 30, 64 << 30), Ok(128 << 30));
        // 64 GiB of RAM: 2 GiB below the hole, 62 GiB from 4 GiB, so it ends at 66 GiB.
        assert_eq!(mmio64("\"66G\"", 66 << 30, 64 << 30), Ok(66 << 30));
        assert_eq!(mmio64("\"4G\"", 4 << 30, 1 << 30), Ok(4 << 30));
        let message = |r: Result<u64, LimitError>| r.map_err(|e| e.to_string());
        assert_eq!(
            message(mmio64("\"64G\"", 64 << 30, 64 << 30)),
            Err(
                "mmio64 = \"64G\": below the top of RAM (64G of RAM ends at 66G) (allowed: a \
                 multiple of 1G from 66G to 2032T)"
                    .into()
            )
        );
        assert_eq!(
            message(mmio64("\"100.5G\"", 201 << 29, 64 << 30)),
            Err(
                "mmio64 = \"100.5G\": not a multiple of 1 GiB (allowed: a multiple of 1G from \
                 66G to 2032T)"
                    .into()
            )
        );
        assert!(message(mmio64("\"2040T\"", 2040 << 40, 64 << 30))
            .expect_err("too high")
            .contains("too high (its 16 TiB would end beyond x86-64's 52-bit"));
    }

    #[test]
    fn names_allow_letters_digits_dash_and_underscore_only() {
        assert_eq!(check_name("host name", "node-07_b"), Ok(()));
        for (name, needle) in [
            ("", "empty"),
            ("a\0b", "'\\0'"),
            ("a\tb", "'\\t'"),
            ("lender:nvme0", "':'"),
            ("host/vm", "'/'"),
            ("a.b", "'.'"),
            ("a b", "' '"),
            ("node{i}", "needs `repeat"),
            ("ü", "'ü'"),
        ] {
            let err = check_name("host name", name).expect_err(name).to_string();
            assert!(err.contains(needle), "{name:?}: {err}");
            assert!(err.contains("(allowed: 1 to 64 of letters"), "{err}");
        }
        let long = "x".repeat(65);
        assert!(check_name("host name", &long)
            .expect_err("long")
            .to_string()
            .contains("65 characters is too long"));
        assert_eq!(
            check_name("component name", "node{i}"),
            Err(LimitError::NameCharacter {
                what: "component name".into(),
                name: "node{i}".into(),
                character: '{'
            })
        );
    }

    #[test]
    fn range_errors_name_the_key_the_value_and_the_bounds() {
        let message = |r: Result<u64, LimitError>| r.map_err(|e| e.to_string());
        assert_eq!(
            in_range("cores", 0, &CORES, ""),
            Err(LimitError::OutOfRange {
                key: "cores".into(),
                value: "0".into(),
                problem: "too small",
                why: String::new(),
                allowed: "1 to 1024".into()
            })
        );
        assert_eq!(
            in_range("cores", 0, &CORES, "").map_err(|e| e.to_string()),
            Err("cores = 0: too small (allowed: 1 to 1024)".into())
        );
        assert_eq!(
            message(power_of_two_size("window", "\"3M\"", 3 << 20, &WINDOW)),
            Err(
                "window = \"3M\": not a power of two (allowed: a power of two from 1M to 8T)"
                    .into()
            )
        );
        assert_eq!(ram("\"16T\"", 16 << 40), Ok(16 << 40),);
        assert_eq!(
            message(ram("18446744073709551615", u64::MAX)),
            Err("ram = 18446744073709551615: too large for the host address map (allowed: 1G to 1024T)".into())
        );
    }
}
