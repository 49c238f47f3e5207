//! Why one operation took longer than another, from their critical paths: the difference of
//! two explained operations split into parts that add up to it exactly. Software and
//! interrupt steps are named (one path has a step the other lacks, or the same step took
//! another time); the hardware's steps are summed per class (links, chips, the device's own
//! work, ...), where per-TLP and per-I/O variation lands.
//!
//! The demo prints a [`Contrast`] as a sentence ([`Contrast::sentence`]) whose parts, in
//! whole nanoseconds, add up to the total it states (up to their rounding); the cli's tests
//! read the demo's output back and check exactly that.

use smartio_machine::{CriticalPath, StepClass};
use std::collections::BTreeMap;

/// One part of a difference, in picoseconds (positive: the first operation took longer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// What differs: "without interrupt delivery to its handler", "chips".
    pub what: String,
    /// By how much.
    pub delta_ps: i64,
}

/// The difference of two operations' latencies and its parts.
///
/// Invariant: the parts' `delta_ps` sum to `total_ps` (every step of both paths is in exactly
/// one part, and the paths tile their operations' latencies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contrast {
    /// The first operation's latency.
    pub a_ps: u64,
    /// The second's.
    pub b_ps: u64,
    /// `a_ps - b_ps`.
    pub total_ps: i64,
    /// The non-zero parts: named steps first (in the order the first path takes them, then
    /// the second's), then the hardware classes in class order.
    pub parts: Vec<Part>,
}

/// Whether a class's steps are named one by one (software the paths run, interrupts they
/// take) rather than summed (the hardware's steps, many and similar).
fn named(class: StepClass) -> bool {
    matches!(class, StepClass::Software | StepClass::Interrupt)
}

/// A step's name without its host: "lender CPU: block layer: submit" → "block layer:
/// submit"; two hosts running the same step compare equal.
fn step_name(what: &str) -> &str {
    match what.split_once(": ") {
        Some((_, rest)) => rest,
        None => what,
    }
}

/// What a class's difference is, in words.
fn class_words(class: StepClass) -> &'static str {
    match class {
        StepClass::Software => "software",
        StepClass::Cpu => "the CPU's own loads, stores and path to its root port",
        StepClass::Link => "links (serialization and propagation)",
        StepClass::Chip => "switch and adapter chips (each transfer's latency drawn in its range)",
        StepClass::RootComplex => "root complexes",
        StepClass::Memory => "memory reads",
        StepClass::Device => "the device's own work (the media time drawn for each I/O)",
        StepClass::Interrupt => "interrupts",
        StepClass::Iommu => "IOMMU page walks",
        StepClass::Waiting => "waiting for busy links",
    }
}

/// The named steps of a path (total per name, in the order first taken) and the other
/// classes' totals.
fn tally(path: &CriticalPath) -> (Vec<(String, u64)>, BTreeMap<StepClass, u64>) {
    let mut steps: Vec<(String, u64)> = Vec::new();
    let mut classes = BTreeMap::new();
    for s in &path.steps {
        let ps = s.duration.as_ps();
        if named(s.class) {
            let name = step_name(&s.what);
            match steps.iter_mut().find(|(n, _)| n == name) {
                Some((_, total)) => *total += ps,
                None => steps.push((name.to_string(), ps)),
            }
        } else {
            *classes.entry(s.class).or_insert(0) += ps;
        }
    }
    (steps, classes)
}

fn signed(ps: u64) -> i64 {
    i64::try_from(ps).unwrap_or(i64::MAX)
}

/// Where one operation's time went, in the same parts as a [`Contrast`]: each named step,
/// then each hardware class. "{label}: 11.199 µs = the device's own work ...: 5621 ns;
/// block layer: submit: 700 ns; ...", the parts of at least half a nanosecond, largest first.
pub fn composition_sentence(label: &str, path: &CriticalPath) -> String {
    let empty = CriticalPath {
        start: path.start,
        end: path.start,
        steps: Vec::new(),
    };
    let c = Contrast::of(path, &empty);
    let parts: Vec<Part> = c
        .parts
        .into_iter()
        .map(|p| Part {
            what: p.what.strip_prefix("with ").unwrap_or(&p.what).to_string(),
            delta_ps: p.delta_ps,
        })
        .collect();
    format!(
        "{label}: {:.3} µs = {}.",
        c.a_ps as f64 / 1e6,
        listed(&parts, false)
    )
}

/// The parts of at least half a nanosecond, largest first, then the smaller ones together,
/// as "what: +12 ns; ..." (signed or not).
fn listed(parts: &[Part], signed: bool) -> String {
    let (mut parts, small): (Vec<&Part>, Vec<&Part>) =
        parts.iter().partition(|p| p.delta_ps.abs() >= 500);
    parts.sort_by_key(|p| std::cmp::Reverse(p.delta_ps.abs()));
    // The parts under half a nanosecond, together, so that the list still adds up.
    let rest = Part {
        what: "the rest, under half a nanosecond each".to_string(),
        delta_ps: small.iter().map(|p| p.delta_ps).sum(),
    };
    if rest.delta_ps.abs() >= 500 {
        parts.push(&rest);
    }
    if parts.is_empty() {
        return "nothing".to_string();
    }
    parts
        .iter()
        .map(|p| {
            let ns = p.delta_ps as f64 / 1000.0;
            if signed {
                format!("{}: {ns:+.0} ns", p.what)
            } else {
                format!("{}: {ns:.0} ns", p.what)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Contrast {
    /// Operation `a` against operation `b`.
    pub fn of(a: &CriticalPath, b: &CriticalPath) -> Contrast {
        let (a_steps, a_classes) = tally(a);
        let (b_steps, b_classes) = tally(b);
        let mut parts = Vec::new();
        for (name, ps) in &a_steps {
            match b_steps.iter().find(|(n, _)| n == name) {
                Some((_, theirs)) if theirs != ps => parts.push(Part {
                    what: name.clone(),
                    delta_ps: signed(*ps) - signed(*theirs),
                }),
                Some(_) => {}
                None => parts.push(Part {
                    what: format!("with {name}"),
                    delta_ps: signed(*ps),
                }),
            }
        }
        for (name, ps) in &b_steps {
            if !a_steps.iter().any(|(n, _)| n == name) {
                parts.push(Part {
                    what: format!("without {name}"),
                    delta_ps: -signed(*ps),
                });
            }
        }
        let classes: std::collections::BTreeSet<StepClass> =
            a_classes.keys().chain(b_classes.keys()).copied().collect();
        for class in classes {
            let theirs = signed(b_classes.get(&class).copied().unwrap_or(0));
            let delta = signed(a_classes.get(&class).copied().unwrap_or(0)) - theirs;
            if delta != 0 {
                parts.push(Part {
                    what: class_words(class).to_string(),
                    delta_ps: delta,
                });
            }
        }
        let (a_ps, b_ps) = (a.total().as_ps(), b.total().as_ps());
        Contrast {
            a_ps,
            b_ps,
            total_ps: signed(a_ps) - signed(b_ps),
            parts,
        }
    }

    /// "{label}: +0.123 µs (9.887 against 9.764 µs) = with X: +100 ns; chips: +23 ns." —
    /// the parts of at least half a nanosecond, largest first.
    pub fn sentence(&self, label: &str) -> String {
        format!(
            "{label}: {:+.3} µs ({:.3} against {:.3} µs) = {}.",
            self.total_ps as f64 / 1e6,
            self.a_ps as f64 / 1e6,
            self.b_ps as f64 / 1e6,
            listed(&self.parts, true)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_machine::PathStep;
    use smartio_platform::time::{SimDuration, SimTime};

    fn step(class: StepClass, what: &str, ns: u64) -> PathStep {
        PathStep {
            start: SimTime(0),
            duration: SimDuration(ns * 1000),
            class,
            part_of: String::new(),
            what: what.to_string(),
            waited_for: String::new(),
            count: 1,
        }
    }

    fn path(steps: Vec<PathStep>) -> CriticalPath {
        CriticalPath {
            start: SimTime(0),
            end: SimTime(0),
            steps,
        }
    }

    #[test]
    fn the_parts_add_up_to_the_difference_and_name_the_steps_one_path_lacks() {
        let irq = path(vec![
            step(StepClass::Software, "lender CPU: block layer: submit", 700),
            step(StepClass::Device, "lender.nvme0: media", 5000),
            step(StepClass::Chip, "lender.chassis (PEX8796)", 110),
            step(StepClass::Interrupt, "lender CPU: interrupt delivery", 200),
            step(
                StepClass::Software,
                "lender CPU: scheduler: wake the waiting thread",
                1300,
            ),
        ]);
        let poll = path(vec![
            step(
                StepClass::Software,
                "borrower CPU: block layer: submit",
                700,
            ),
            step(StepClass::Device, "lender.nvme0: media", 5120),
            step(StepClass::Chip, "lender.chassis (PEX8796)", 100),
            step(
                StepClass::Software,
                "borrower CPU: poll the completion queue",
                90,
            ),
        ]);
        let c = Contrast::of(&poll, &irq);
        assert_eq!(c.total_ps, (6010 - 7310) * 1000);
        assert_eq!(c.parts.iter().map(|p| p.delta_ps).sum::<i64>(), c.total_ps);
        let what: Vec<(&str, i64)> = c
            .parts
            .iter()
            .map(|p| (p.what.as_str(), p.delta_ps / 1000))
            .collect();
        assert_eq!(
            what,
            [
                ("with poll the completion queue", 90),
                ("without interrupt delivery", -200),
                ("without scheduler: wake the waiting thread", -1300),
                (class_words(StepClass::Chip), -10),
                (class_words(StepClass::Device), 120),
            ]
        );
        assert_eq!(
            c.sentence("2 vs 1"),
            format!(
                "2 vs 1: -1.300 µs (6.010 against 7.310 µs) = without scheduler: wake the \
                 waiting thread: -1300 ns; without interrupt delivery: -200 ns; {}: +120 ns; \
                 with poll the completion queue: +90 ns; {}: -10 ns.",
                class_words(StepClass::Device),
                class_words(StepClass::Chip)
            )
        );
    }

    #[test]
    fn a_composition_lists_every_step_and_class_and_adds_up() {
        let p = path(vec![
            step(StepClass::Software, "lender CPU: block layer: submit", 700),
            step(StepClass::Link, "a link", 10),
            step(StepClass::Link, "another link", 5),
        ]);
        let sentence = composition_sentence("1", &p);
        assert_eq!(
            sentence,
            format!(
                "1: 0.715 µs = block layer: submit: 700 ns; {}: 15 ns.",
                class_words(StepClass::Link)
            )
        );
    }

    #[test]
    fn equal_paths_differ_by_nothing() {
        let p = path(vec![step(StepClass::Link, "a link", 10)]);
        let c = Contrast::of(&p, &p);
        assert!(c.parts.is_empty());
        assert_eq!(
            c.sentence("x"),
            "x: +0.000 µs (0.010 against 0.010 µs) = nothing."
        );
    }

    #[test]
    fn parts_under_half_a_nanosecond_are_listed_together() {
        let a = path(vec![
            step(StepClass::Link, "a link", 10),
            step(StepClass::Chip, "a chip", 100),
        ]);
        let mut b = a.clone();
        b.steps[0].duration = SimDuration(9_700);
        b.steps[1].duration = SimDuration(99_600);
        assert_eq!(
            Contrast::of(&a, &b).sentence("x"),
            "x: +0.001 µs (0.110 against 0.109 µs) = the rest, under half a nanosecond each: +1 ns."
        );
    }
}
