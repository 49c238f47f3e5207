//! The allowed range of every scenario value, with the reason for each bound, and the checks
//! that apply them. Messages have the form `key = value: why (allowed: range)`; the caller
//! prefixes the entity (`host "a": `) and the file and line.

use crate::enumerate::{MAX_RAM, MIN_RAM};
use crate::ntb::CPU_RESERVED_REQUESTER_IDS;
use crate::units::format_size;
use std::fmt::Display;
use std::ops::RangeInclusive;

/// Hosts in one scenario, repeated hosts included. Published PCIe clusters have tens of hosts
/// (the papers' largest is 60); ten thousand is far beyond them yet still builds in seconds.
pub const MAX_HOSTS: u64 = 10_000;

/// Cluster switches in one scenario (the fabric keeps a path tree per switch: `S²` hops).
pub const MAX_CLUSTER_SWITCHES: usize = 1024;

/// Components (switches, devices, adapters) in one host: each needs its own PCI bus at
/// least, and a host has 256 buses.
pub const MAX_COMPONENTS: usize = 256;

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

/// The smallest look-up-table entry: one 4 KiB page (IOMMU and segment mappings are
/// page-granular).
pub const MIN_ENTRY_SIZE: u64 = 4096;

/// Requester-id entries of an adapter: the host CPU's two reserved ones at least.
pub const REQUESTER_IDS: RangeInclusive<i64> = CPU_RESERVED_REQUESTER_IDS as i64..=1024;

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
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let allowed = format!("1 to {MAX_NAME_LEN} of {NAME_CHARACTERS}");
    if name.is_empty() {
        return Err(format!("{what} {name:?}: empty (allowed: {allowed})"));
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(format!(
            "{what} {name:?}: {} characters is too long (allowed: {allowed})",
            name.chars().count()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        let hint = if c == '{' {
            " (a name template needs `repeat = [first, last]`)"
        } else {
            ""
        };
        return Err(format!(
            "{what} {name:?}: the character {c:?} is not allowed{hint} (allowed: {allowed})"
        ));
    }
    Ok(())
}

/// `key = value: too small/too large (allowed: a to b)` unless `value` is in `range`.
pub fn in_range<T: PartialOrd + Display>(
    key: &str,
    value: T,
    range: &RangeInclusive<T>,
    why: &str,
) -> Result<T, String> {
    let problem = if value < *range.start() {
        "too small"
    } else if value > *range.end() {
        "too large"
    } else {
        return Ok(value);
    };
    Err(format!(
        "{key} = {value}: {problem}{why} (allowed: {} to {})",
        range.start(),
        range.end()
    ))
}

/// A size in `range` that is a power of two; `shown` is the value as written.
pub fn power_of_two_size(
    key: &str,
    shown: &str,
    bytes: u64,
    range: &RangeInclusive<u64>,
) -> Result<u64, String> {
    let problem = if !bytes.is_power_of_two() {
        "not a power of two"
    } else if bytes < *range.start() {
        "too small"
    } else if bytes > *range.end() {
        "too large"
    } else {
        return Ok(bytes);
    };
    Err(format!(
        "{key} = {shown}: {problem} (allowed: a power of two from {} to {})",
        format_size(*range.start()),
        format_size(*range.end())
    ))
}

/// A host's RAM in [`RAM`]; `shown` is the value as written.
pub fn ram(shown: &str, bytes: u64) -> Result<u64, String> {
    if RAM.contains(&bytes) {
        return Ok(bytes);
    }
    let problem = if bytes < *RAM.start() {
        "too small"
    } else {
        "too large for the host address map"
    };
    Err(format!(
        "ram = {shown}: {problem} (allowed: {} to {})",
        format_size(*RAM.start()),
        format_size(*RAM.end())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let err = check_name("host name", name).expect_err(name);
            assert!(err.contains(needle), "{name:?}: {err}");
            assert!(err.contains("(allowed: 1 to 64 of letters"), "{err}");
        }
        let long = "x".repeat(65);
        assert!(check_name("host name", &long)
            .expect_err("long")
            .contains("65 characters is too long"));
    }

    #[test]
    fn range_errors_name_the_key_the_value_and_the_bounds() {
        assert_eq!(
            in_range("cores", 0, &CORES, ""),
            Err("cores = 0: too small (allowed: 1 to 1024)".into())
        );
        assert_eq!(
            power_of_two_size("window", "\"3M\"", 3 << 20, &WINDOW),
            Err(
                "window = \"3M\": not a power of two (allowed: a power of two from 1M to 8T)"
                    .into()
            )
        );
        assert_eq!(ram("\"16T\"", 16 << 40), Ok(16 << 40),);
        assert_eq!(
            ram("18446744073709551615", u64::MAX),
            Err("ram = 18446744073709551615: too large for the host address map (allowed: 1G to 1024T)".into())
        );
    }
}
