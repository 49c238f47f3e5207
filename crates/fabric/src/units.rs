//! Parsing of the human units used in scenario files: sizes ("64 GiB") and links ("gen3 x16").

use serde::Serialize;
use std::fmt;
use thiserror::Error;

/// Why a size written as text is not one; every message quotes the text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeError {
    /// A minus sign.
    #[error("size {text:?}: a size cannot be negative")]
    Negative {
        /// As written.
        text: String,
    },
    /// A unit other than B, K, M, G, T (with or without `B`/`iB`).
    #[error("size {text:?}: unknown unit {unit:?} (use K, M, G or T)")]
    UnknownUnit {
        /// As written.
        text: String,
        /// The unit part.
        unit: String,
    },
    /// A decimal-looking unit (`KB`, `MB`, `GB`, `TB`): sizes are binary, and `4KB` would
    /// read as 4000 bytes to many, so it is refused with the binary spellings.
    #[error(
        "size {text:?}: {unit:?} is ambiguous (1000 or 1024?); sizes are binary: write {number}{letter} or {number}{letter}iB for {number} × 2^{shift} bytes"
    )]
    DecimalUnit {
        /// As written.
        text: String,
        /// The unit part.
        unit: String,
        /// The number part.
        number: String,
        /// `K`, `M`, `G` or `T`.
        letter: char,
        /// Its power of two.
        shift: u32,
    },
    /// A unit without a number.
    #[error("size {text:?}: no number")]
    NoNumber {
        /// As written.
        text: String,
    },
    /// The number part does not parse (two dots, a lone dot).
    #[error("size {text:?}: {number:?} is not a number")]
    NotANumber {
        /// As written.
        text: String,
        /// The number part.
        number: String,
    },
    /// More than `u64::MAX` bytes.
    #[error("size {text:?}: too large (at most {max} bytes)", max = u64::MAX)]
    TooLarge {
        /// As written.
        text: String,
    },
    /// A fraction that does not make whole bytes (`"0.3"`).
    #[error("size {text:?} is not a whole number of bytes")]
    NotWholeBytes {
        /// As written.
        text: String,
    },
}

/// Why a TOML value under `key` is not a size.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeValueError {
    /// A negative integer.
    #[error("{key} = {value}: a size cannot be negative")]
    Negative {
        /// The key.
        key: String,
        /// The value.
        value: i64,
    },
    /// A string that is not a size.
    #[error("{key}: {source}")]
    Text {
        /// The key.
        key: String,
        /// Why.
        source: SizeError,
    },
    /// Neither an integer nor a string.
    #[error("{key} = {value}: expected a size — a number of bytes or a string such as \"64G\"")]
    NotASize {
        /// The key.
        key: String,
        /// The value, as TOML writes it.
        value: String,
    },
}

/// The forms a link may be written in, ending every [`LinkError`] message.
const LINK_FORMS: &str =
    "(allowed: \"genG xW\" with G from 1 to 5 and W one of 1, 2, 4, 8, 16, 32)";

/// Why a link is not `"genG xW"`; every message quotes the text and ends with the forms.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LinkError {
    /// Not starting with `gen`.
    #[error("{text:?}: expected the form \"gen3 x16\" {LINK_FORMS}")]
    Form {
        /// As written.
        text: String,
    },
    /// No generation number after `gen`.
    #[error("{text:?}: missing or bad generation number {LINK_FORMS}")]
    BadGeneration {
        /// As written.
        text: String,
    },
    /// No lane count.
    #[error("{text:?}: missing or bad lane count {LINK_FORMS}")]
    BadLaneCount {
        /// As written.
        text: String,
    },
    /// A generation outside 1 to 5.
    #[error("{text:?}: generation {gen} is not a PCIe generation the model knows {LINK_FORMS}")]
    UnknownGeneration {
        /// As written.
        text: String,
        /// The generation.
        gen: u8,
    },
    /// A width PCIe does not have.
    #[error("{text:?}: width x{width} is not a PCIe link width {LINK_FORMS}")]
    UnknownWidth {
        /// As written.
        text: String,
        /// The lane count.
        width: u8,
    },
}

/// Parses a byte size such as `4096`, `"4K"`, `"64 GiB"`, `"1.5M"` (binary multiples: K, M,
/// G, T, also written KiB, MiB, GiB, TiB; `B` for bytes). `KB`, `MB`, `GB` and `TB` are refused
/// ([`SizeError::DecimalUnit`]): many read them as powers of ten.
///
/// The number is parsed exactly, without going through floating point: a fraction is allowed
/// when it makes a whole number of bytes (`"1.5K"` is 1536, `"0.3"` is an error), and a size
/// above `u64::MAX` bytes is an error, never a rounded or saturated value.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let text_owned = || text.to_string();
    let t = text.trim();
    if t.starts_with('-') {
        return Err(SizeError::Negative { text: text_owned() });
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let lower = unit.to_ascii_lowercase();
    if let [letter @ (b'k' | b'm' | b'g' | b't'), b'b'] = lower.as_bytes() {
        let (letter, shift) = match letter {
            b'k' => ('K', 10),
            b'm' => ('M', 20),
            b'g' => ('G', 30),
            _ => ('T', 40),
        };
        return Err(SizeError::DecimalUnit {
            text: text_owned(),
            unit: unit.to_string(),
            number: num.to_string(),
            letter,
            shift,
        });
    }
    let shift: u32 = match lower.as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        _ => {
            return Err(SizeError::UnknownUnit {
                text: text_owned(),
                unit: unit.to_string(),
            })
        }
    };
    if num.is_empty() {
        return Err(SizeError::NoNumber { text: text_owned() });
    }
    let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
    if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
        return Err(SizeError::NotANumber {
            text: text_owned(),
            number: num.to_string(),
        });
    }
    let too_large = || SizeError::TooLarge { text: text_owned() };
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let whole = whole.checked_mul(1 << shift).ok_or_else(too_large)?;
    let part = fraction_bytes(fraction.trim_end_matches('0'), shift)
        .ok_or_else(|| SizeError::NotWholeBytes { text: text_owned() })?;
    whole.checked_add(part).ok_or_else(too_large)
}

/// A size given in a TOML file as a number of bytes (`4096`) or a string (`"64G"`); the error
/// names `key` and the value.
pub fn size_value(key: &str, value: &toml::Value) -> Result<u64, SizeValueError> {
    match value {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| SizeValueError::Negative {
            key: key.to_string(),
            value: *n,
        }),
        toml::Value::String(s) => parse_size(s).map_err(|source| SizeValueError::Text {
            key: key.to_string(),
            source,
        }),
        other => Err(SizeValueError::NotASize {
            key: key.to_string(),
            value: other.to_string(),
        }),
    }
}

/// `0.<digits> × 2^shift` as a whole number, or `None` if it is not one.
///
/// With `n` significant digits (no trailing zeros) the value is `digits × 2^shift / 10^n =
/// digits × 2^(shift−n) / 5^n`: whole only if `n ≤ shift` (otherwise `digits` would need to
/// be a multiple of 10, but its last digit is not 0) and `5^n` divides `digits`. The quotient
/// `digits / 5^n` is below `2^n ≤ 2^40`, and every intermediate fits in a `u128`.
fn fraction_bytes(digits: &str, shift: u32) -> Option<u64> {
    let n = u32::try_from(digits.len()).ok()?;
    if n > shift {
        return None;
    }
    let divisor = 5u128.pow(n);
    let (mut quotient, mut remainder) = (0u128, 0u128);
    for d in digits.bytes() {
        let current = remainder * 10 + u128::from(d - b'0');
        quotient = quotient * 10 + current / divisor;
        remainder = current % divisor;
    }
    if remainder != 0 {
        return None;
    }
    u64::try_from(quotient << (shift - n)).ok()
}

/// Formats a byte count with the largest binary unit that divides it evenly.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (scale, name) in UNITS {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{name}", bytes / scale);
        }
    }
    format!("{bytes}")
}

/// A PCIe link's generation and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LinkSpec {
    /// PCIe generation, 1 to 5.
    pub gen: u8,
    /// Lane count: 1, 2, 4, 8, 16 or 32.
    pub width: u8,
}

impl LinkSpec {
    /// Parses `"gen3 x16"` (also `"Gen3x16"`, `"gen3 16"`). The error quotes the text and
    /// ends with the allowed forms.
    pub fn parse(text: &str) -> Result<LinkSpec, LinkError> {
        let text_owned = || text.to_string();
        let lower = text.trim().to_ascii_lowercase();
        let rest = lower
            .strip_prefix("gen")
            .ok_or_else(|| LinkError::Form { text: text_owned() })?;
        let gen_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let gen: u8 = rest[..gen_end]
            .parse()
            .map_err(|_| LinkError::BadGeneration { text: text_owned() })?;
        let width_text = rest[gen_end..].trim().trim_start_matches('x');
        let width: u8 = width_text
            .parse()
            .map_err(|_| LinkError::BadLaneCount { text: text_owned() })?;
        if !(1..=5).contains(&gen) {
            return Err(LinkError::UnknownGeneration {
                text: text_owned(),
                gen,
            });
        }
        if ![1, 2, 4, 8, 16, 32].contains(&width) {
            return Err(LinkError::UnknownWidth {
                text: text_owned(),
                width,
            });
        }
        Ok(LinkSpec { gen, width })
    }
}

impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gen{} x{}", self.gen, self.width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("64 GiB"), Ok(64 << 30));
        assert_eq!(parse_size("1.5M"), Ok(3 << 19));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("0.3").is_err());
    }

    #[test]
    fn sizes_parse_exactly_up_to_the_largest_u64_and_not_beyond() {
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_size("18446744073709551614"), Ok(u64::MAX - 1));
        assert_eq!(parse_size("9007199254740993"), Ok((1 << 53) + 1));
        assert_eq!(parse_size("16777215T"), Ok(((1 << 24) - 1) << 40));
        assert_eq!(parse_size("0.0009765625K"), Ok(1));
        assert_eq!(parse_size("1.25K"), Ok(1280));
        assert_eq!(parse_size("2.50M"), Ok(5 << 19));
        assert_eq!(parse_size(".5K"), Ok(512));
        for text in [
            "18446744073709551616",
            "16777216T",
            "99999999999999999999999999G",
            "18446744073709551615.5K",
        ] {
            let err = parse_size(text).expect_err(text).to_string();
            assert!(err.contains(&format!("{text:?}")), "{err}");
            assert!(
                err.contains("too large (at most 18446744073709551615 bytes)"),
                "{err}"
            );
        }
    }

    #[test]
    fn malformed_or_fractional_sizes_are_rejected_with_the_text() {
        for (text, problem) in [
            ("0.3", "not a whole number of bytes"),
            (
                "1.0000000000000000000000001T",
                "not a whole number of bytes",
            ),
            ("1.2.3M", "is not a number"),
            (".", "is not a number"),
            ("-4K", "cannot be negative"),
            ("GiB", "no number"),
            ("4 KB/s", "unknown unit"),
            ("4KB", "sizes are binary: write 4K or 4KiB"),
            ("64 GB", "write 64G or 64GiB"),
            ("1.5mb", "ambiguous"),
        ] {
            let err = parse_size(text).expect_err(text).to_string();
            assert!(err.contains(problem), "{text}: {err}");
            assert!(err.contains(&format!("{text:?}")), "{text}: {err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_byte_count_round_trips_through_its_formatted_size(bytes: u64) {
            proptest::prop_assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }

        #[test]
        fn every_size_the_parser_accepts_round_trips(
            whole in 0u64..1 << 24,
            fraction in "[0-9]{0,6}",
            unit in proptest::sample::select(&["", "K", "KiB", "M", "g", "T", " GiB", "b"][..]),
        ) {
            let text = if fraction.is_empty() {
                format!("{whole}{unit}")
            } else {
                format!("{whole}.{fraction}{unit}")
            };
            if let Ok(bytes) = parse_size(&text) {
                proptest::prop_assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
                proptest::prop_assert_eq!(parse_size(&bytes.to_string()), Ok(bytes));
            }
        }
    }

    #[test]
    fn toml_sizes_are_integers_or_strings_and_the_error_names_the_key() {
        assert_eq!(size_value("ram", &toml::Value::Integer(4096)), Ok(4096));
        assert_eq!(
            size_value("ram", &toml::Value::String("2K".into())),
            Ok(2048)
        );
        assert_eq!(
            size_value("ram", &toml::Value::Float(1.5)),
            Err(SizeValueError::NotASize {
                key: "ram".into(),
                value: "1.5".into()
            })
        );
        assert_eq!(
            size_value("ram", &toml::Value::Float(1.5))
                .expect_err("a float")
                .to_string(),
            "ram = 1.5: expected a size — a number of bytes or a string such as \"64G\""
        );
        assert_eq!(
            size_value("window", &toml::Value::Integer(-1)),
            Err(SizeValueError::Negative {
                key: "window".into(),
                value: -1
            })
        );
        assert_eq!(
            parse_size("-4K"),
            Err(SizeError::Negative { text: "-4K".into() })
        );
        let err = size_value("ram", &toml::Value::String("7 parsecs".into()))
            .expect_err("unit")
            .to_string();
        assert!(
            err.starts_with("ram: size \"7 parsecs\": unknown unit"),
            "{err}"
        );
    }

    #[test]
    fn sizes_format_with_the_largest_even_unit() {
        assert_eq!(format_size(64 << 30), "64G");
        assert_eq!(format_size(4096 + 1), "4097");
        assert_eq!(format_size(3 << 19), "1536K");
    }

    #[test]
    fn links_parse_generation_and_width() {
        assert_eq!(
            LinkSpec::parse("gen3 x16"),
            Ok(LinkSpec { gen: 3, width: 16 })
        );
        assert_eq!(LinkSpec::parse("Gen4x4"), Ok(LinkSpec { gen: 4, width: 4 }));
        assert!(LinkSpec::parse("gen3 x3").is_err());
        assert!(LinkSpec::parse("gen9 x16").is_err());
        assert!(LinkSpec::parse("pcie3").is_err());
        assert_eq!(
            LinkSpec::parse("gen3 x3"),
            Err(LinkError::UnknownWidth {
                text: "gen3 x3".into(),
                width: 3
            })
        );
        assert_eq!(
            LinkSpec::parse("gen3 x3").expect_err("x3").to_string(),
            "\"gen3 x3\": width x3 is not a PCIe link width (allowed: \"genG xW\" with G \
             from 1 to 5 and W one of 1, 2, 4, 8, 16, 32)"
        );
        for text in ["gen0 x4", "gen3 x999", "gen99999 x4", "gen x4", "gen3"] {
            let err = LinkSpec::parse(text).expect_err(text).to_string();
            assert!(err.starts_with(&format!("{text:?}: ")), "{err}");
            assert!(err.ends_with("32)"), "{err}");
        }
    }
}
