//! The values of the command line's options: the one typed range check of each, and the
//! value types options share (`--direction`). Every command's clap types name these as their
//! `value_parser`; nothing here knows a command.
//!
//! A value outside its range is refused by clap with the option, the value, the allowed
//! range and where the bound comes from, e.g.
//! `invalid value '0' for '--iodepth <N>': must be 1..=4095 (...)`. Nothing is clamped.
//! Checks that need the scenario (a device's memory, the queue pairs a controller grants)
//! happen in the workloads, whose errors name the option too.

use crate::value_error::{Bounds, ValueError};
use clap::ValueEnum;
use smartio_platform::SimDuration;
use smartio_workloads::fio::{MAX_BUFFER_BYTES, MAX_IODEPTH, MAX_JOBS, MAX_OPS, MAX_RUNTIME};

/// Most round trips of a ping-pong: at the emulator's ~400 000 round trips per second, about
/// five minutes of wall time; the percentiles of a deterministic model settle long before.
pub const MAX_ITERATIONS: u64 = 100_000_000;

/// Most copies or blocks per size of a bandwidth benchmark: the model is deterministic, so
/// medians settle within a few; each repeat of the largest size copies it once more.
pub const MAX_REPEAT: u64 = 1000;

/// Largest transfer or block size of a bandwidth benchmark: a copy holds its bytes (twice,
/// source and destination) in this process's memory.
pub const MAX_TRANSFER: u64 = 1 << 30;

/// Largest block size of fio: far beyond any controller's maximum transfer (MDTS), which
/// the run checks; the in-flight buffers are bounded by [`MAX_BUFFER_BYTES`] as well.
pub const MAX_BS: u64 = MAX_BUFFER_BYTES;

/// Bytes `bench engine` streams in one 4 MiB copy each way.
pub const ENGINE_STEP: u64 = 8 << 20;

/// Most bytes `bench engine` streams: about three minutes of wall time.
pub const MAX_ENGINE_BYTES: u64 = 256 << 30;

/// Most I/Os per measured run of an experiment (`exp --ops`): `share-30` does them on each
/// of its 30 clients, about 45 s of wall time per 100 000.
pub const MAX_EXP_OPS: u64 = 10_000_000;

/// The highest namespace id: 0 is no namespace and 0xFFFFFFFF means "every namespace".
pub const MAX_NSID: u64 = 0xFFFF_FFFE;

/// `--direction` of `bench dma` (with or without `--adapter`) and `bench p2p`: which way the
/// copies go (each command says what that means for its devices).
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Direction {
    Write,
    Read,
}

/// A device option's value — `nvme0`, `nic0.vf1` (a virtual function), `lender:nvme0` or
/// `lender:nic0.vf1` — checked by the one parser of device names
/// ([`smartio_fabric::DeviceRef`]), which the scenario's VM device lists use too.
pub fn device(text: &str) -> Result<String, ValueError> {
    Ok(smartio_fabric::DeviceRef::parse(text)?.to_string())
}

/// A whole number within `min..=max`; `why` says where the bound comes from.
pub fn whole(text: &str, min: u64, max: u64, why: &'static str) -> Result<u64, ValueError> {
    let t = text.trim();
    let bounds = Bounds { min, max, why };
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::NotWhole(bounds));
    }
    match t.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(ValueError::Whole(bounds)),
    }
}

/// A whole number that fits `u32` by its bound.
pub fn whole_u32(text: &str, min: u64, max: u64, why: &'static str) -> Result<u32, ValueError> {
    let v = whole(text, min, max, why)?;
    u32::try_from(v).map_err(|_| ValueError::Whole(Bounds { min, max, why: "" }))
}

/// A size such as `4K` or `1.5M` (binary units) within `min..=max`.
pub fn size(text: &str, min: u64, max: u64, why: &'static str) -> Result<u64, ValueError> {
    let value = smartio_fabric::units::parse_size(text)?;
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(ValueError::Size {
            value,
            min,
            max,
            why,
        })
    }
}

/// `pingpong --iterations`.
pub fn iterations(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        1,
        MAX_ITERATIONS,
        "about five minutes of wall time at the most",
    )
}

/// `fio --iodepth`.
pub fn iodepth(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        1,
        u64::from(MAX_IODEPTH),
        "an NVMe queue of the emulated controller has 4096 entries, one always empty",
    )
}

/// `fio --jobs`.
pub fn jobs(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        1,
        u64::from(MAX_JOBS),
        "one NVMe I/O queue pair per job; the controller grants fewer",
    )
}

/// `fio --ops`.
pub fn fio_ops(text: &str) -> Result<u64, ValueError> {
    whole(
        text,
        1,
        MAX_OPS,
        "about three hours of wall time at ~100k I/Os per second",
    )
}

/// `--repeat` (and `--copies`) of the bandwidth benchmarks: copies or blocks per size.
pub fn repeat(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        1,
        MAX_REPEAT,
        "the median is reported and settles within a few",
    )
}

/// `fio --nsid`.
pub fn nsid(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        1,
        MAX_NSID,
        "0 is no namespace, 0xFFFFFFFF means every namespace",
    )
}

/// `fio --rwmixread`.
pub fn percent(text: &str) -> Result<u32, ValueError> {
    whole_u32(text, 0, 100, "a percentage")
}

/// `exp --ops`.
pub fn exp_ops(text: &str) -> Result<u64, ValueError> {
    whole(
        text,
        1,
        MAX_EXP_OPS,
        "per measured run; share-30 runs them on each of its 30 clients",
    )
}

/// `fio --bs`.
pub fn block_size(text: &str) -> Result<u64, ValueError> {
    size(
        text,
        1,
        MAX_BS,
        "1G at most, beyond any controller's maximum transfer",
    )
}

/// `--size` of `fio` and `serve nbd`: bytes of the namespace to use.
pub fn range_size(text: &str) -> Result<u64, ValueError> {
    size(text, 1, u64::MAX, "at least one block")
}

/// `--sizes` of the bandwidth benchmarks: one transfer or block size.
pub fn transfer_size(text: &str) -> Result<u64, ValueError> {
    size(
        text,
        1,
        MAX_TRANSFER,
        "1G at most: a copy holds its bytes in this process's memory",
    )
}

/// `bench engine --bytes`: whole 4 MiB copies each way.
pub fn engine_bytes(text: &str) -> Result<u64, ValueError> {
    let v = size(
        text,
        ENGINE_STEP,
        MAX_ENGINE_BYTES,
        "8M to 256G: one 4 MiB copy each way at the least, about three minutes of wall time at the most",
    )?;
    if !v.is_multiple_of(ENGINE_STEP) {
        return Err(ValueError::EngineStep {
            value: v,
            step: ENGINE_STEP,
        });
    }
    Ok(v)
}

/// `iperf --parallel`: streams per client.
pub fn streams(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        1,
        u64::from(smartio_net::iperf::MAX_STREAMS),
        "streams per client",
    )
}

/// `iperf --len`: bytes per write.
pub fn write_len(text: &str) -> Result<u64, ValueError> {
    size(
        text,
        1,
        16 << 20,
        "16M at most: a write's bytes are held in this process's memory",
    )
}

/// The units a duration takes, in picoseconds each. A duration always names its unit: a bare
/// number is refused rather than taken as seconds (`10` could as well be 10 ms).
const DURATION_UNITS: [(&str, f64); 4] = [("ns", 1e3), ("us", 1e6), ("ms", 1e9), ("s", 1e12)];

/// A duration with its unit (`500us`, `10ms`, `1.5s`) in picoseconds, not yet range-checked.
fn duration_ps(text: &str) -> Result<f64, ValueError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| ValueError::NotDuration {
        text: text.to_string(),
    })?;
    let unit = unit.trim();
    if unit.is_empty() {
        return Err(ValueError::NoUnit {
            text: text.to_string(),
            number: num.to_string(),
        });
    }
    let ps_per_unit = DURATION_UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, ps)| *ps)
        .ok_or_else(|| ValueError::UnknownUnit {
            text: text.to_string(),
            unit: unit.to_string(),
        })?;
    // Finite: `num` holds only digits and dots.
    Ok(value * ps_per_unit)
}

/// A virtual duration such as `500us`, `10ms` or `1.5s` (the unit is required), more than 0
/// and at most [`MAX_RUNTIME`]; converted exactly to picoseconds (rounded to the nearest).
pub fn runtime(text: &str) -> Result<SimDuration, ValueError> {
    let ps = duration_ps(text)?;
    let max = MAX_RUNTIME.as_ps();
    let max_s = max / 1_000_000_000_000;
    if !(ps.is_finite() && ps <= max as f64) {
        return Err(ValueError::Runtime {
            text: text.to_string(),
            max_s,
        });
    }
    let ps = ps.round() as u64;
    if ps == 0 {
        return Err(ValueError::BelowPicosecond {
            text: text.to_string(),
            max_s,
        });
    }
    Ok(SimDuration(ps))
}

/// Longest wall-clock period of `serve nbd --stats-every`: a day.
pub const MAX_STATS_EVERY_S: u64 = 86_400;

/// A wall-clock period in whole seconds with its unit (`1s`, `2000ms`), 1s to a day.
pub fn wall_seconds(text: &str) -> Result<std::time::Duration, ValueError> {
    let ps = duration_ps(text)?;
    let seconds = ps / 1e12;
    if !((1.0..=MAX_STATS_EVERY_S as f64).contains(&seconds) && seconds.fract() == 0.0) {
        return Err(ValueError::WallSeconds {
            text: text.to_string(),
            max_s: MAX_STATS_EVERY_S,
        });
    }
    Ok(std::time::Duration::from_secs(seconds as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_outside_its_range_names_the_range_and_the_reason() {
        assert_eq!(iodepth("4095"), Ok(4095));
        let err = iodepth("0").expect_err("zero").to_string();
        assert!(
            err.contains("1..=4095") && err.contains("4096 entries"),
            "{err}"
        );
        let err = iodepth("5000000000").expect_err("too large").to_string();
        assert!(err.contains("1..=4095"), "{err}");
        let err = fio_ops("18446744073709551616")
            .expect_err("past u64")
            .to_string();
        assert!(err.contains("1..=1000000000"), "{err}");
        let err = repeat("-1").expect_err("negative").to_string();
        assert!(err.starts_with("not a whole number"), "{err}");
        assert_eq!(percent("100"), Ok(100));
        assert!(percent("101").is_err());
    }

    #[test]
    fn runtimes_convert_exactly_and_past_the_maximum_are_refused() {
        assert_eq!(runtime("10ms"), Ok(SimDuration(10_000_000_000)));
        assert_eq!(runtime("1.5us"), Ok(SimDuration(1_500_000)));
        assert_eq!(runtime("3600s"), Ok(MAX_RUNTIME));
        for bad in ["3601s", "18446744073709551616ns", "99999999999999999999s"] {
            let err = runtime(bad).expect_err(bad).to_string();
            assert!(err.contains("at most 3600s"), "{bad}: {err}");
        }
        let err = runtime("0.0001ns")
            .expect_err("below a picosecond")
            .to_string();
        assert!(err.contains("less than 1 ps"), "{err}");
        assert!(runtime("0s").is_err());
    }

    #[test]
    fn a_duration_without_a_unit_is_refused_with_the_spellings_to_use() {
        for bare in ["10", "0", "1.5", " 3600 "] {
            let err = runtime(bare).expect_err(bare).to_string();
            assert!(
                err.contains("has no unit") && err.contains("ms"),
                "{bare}: {err}"
            );
        }
        let err = runtime("10").expect_err("bare").to_string();
        assert!(err.contains("10s, 10ms, 10us or 10ns"), "{err}");
        let err = wall_seconds("5").expect_err("bare").to_string();
        assert!(err.contains("5s, 5ms"), "{err}");
        assert_eq!(wall_seconds("2s"), Ok(std::time::Duration::from_secs(2)));
        assert_eq!(
            wall_seconds("3000ms"),
            Ok(std::time::Duration::from_secs(3))
        );
        assert!(wall_seconds("1500ms").is_err());
        assert!(wall_seconds("86401s").is_err());
    }

    #[test]
    fn engine_bytes_must_be_whole_copies_each_way() {
        assert_eq!(engine_bytes("16M"), Ok(16 << 20));
        let err = engine_bytes("12M").expect_err("not a multiple").to_string();
        assert!(err.contains("multiple of 8M"), "{err}");
        let err = engine_bytes("4M").expect_err("too small").to_string();
        assert!(err.contains("8388608..="), "{err}");
    }
}
