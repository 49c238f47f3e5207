//! Parsing of the human units used in scenario files: sizes ("64 GiB") and links ("gen3 x16").

use serde::Serialize;
use std::fmt;

/// Parses a byte size such as `4096`, `"4K"`, `"64 GiB"`, `"1.5M"` (binary multiples).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "size {text:?}: unknown unit {unit:?} (use K, M, G or T)"
            ))
        }
    };
    if num.is_empty() {
        return Err(format!("size {text:?}: no number"));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| format!("size {text:?}: {num:?} is not a number"))?;
    let bytes = value * multiplier as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes <= u64::MAX as f64) || bytes.fract() != 0.0 {
        return Err(format!("size {text:?} is not a whole number of bytes"));
    }
    Ok(bytes as u64)
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
    /// Parses `"gen3 x16"` (also `"Gen3x16"`, `"gen3 16"`).
    pub fn parse(text: &str) -> Result<LinkSpec, String> {
        let lower = text.trim().to_ascii_lowercase();
        let rest = lower
            .strip_prefix("gen")
            .ok_or_else(|| format!("link {text:?}: expected the form \"gen3 x16\""))?;
        let gen_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let gen: u8 = rest[..gen_end]
            .parse()
            .map_err(|_| format!("link {text:?}: missing generation number"))?;
        let width_text = rest[gen_end..].trim().trim_start_matches('x');
        let width: u8 = width_text
            .parse()
            .map_err(|_| format!("link {text:?}: missing lane count (x1 to x32)"))?;
        if !(1..=5).contains(&gen) {
            return Err(format!("link {text:?}: generation must be 1 to 5"));
        }
        if ![1, 2, 4, 8, 16, 32].contains(&width) {
            return Err(format!(
                "link {text:?}: width must be x1, x2, x4, x8, x16 or x32"
            ));
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
    }
}
