//! The validation pass over a parsed calibration: every `{ value, source }` entry, named by
//! its section and key, checked against its rule in [`super::ranges::RULES`], and the rules
//! that join two keys.

use super::ranges::{self, rule_for, Allowed};
use super::spans::Lines;
use super::{Calibration, CalibrationError};

impl Calibration {
    /// Checks every value against its range ([`ranges::RULES`]), every source for text, every
    /// device `extra` key against the known ones, and the rules that join two keys. `file`
    /// names the source in the error (a calibration built in code has no lines).
    pub fn validate(&self, file: &str) -> Result<(), CalibrationError> {
        self.check(file, &Lines::default())
    }

    pub(super) fn check(&self, file: &str, lines: &Lines) -> Result<(), CalibrationError> {
        if !self.devices.contains_key("default") {
            return Err(CalibrationError {
                file: file.to_string(),
                line: None,
                message: "missing [devices.default] (the parameters of device kinds without \
                          their own table)"
                    .to_string(),
            });
        }
        let mut problems = self.entry_problems(lines);
        problems.extend(self.completion_problem(lines));
        problems.extend(self.chip_problems(lines));
        problems.extend(self.spread_problems(lines));
        // The earliest line first; problems without a line after those with one.
        problems.sort_by_key(|(line, _)| (line.is_none(), *line));
        match problems.into_iter().next() {
            None => Ok(()),
            Some((line, message)) => Err(CalibrationError {
                file: file.to_string(),
                line,
                message,
            }),
        }
    }

    /// Each entry's blank source, unknown key or value outside its rule.
    fn entry_problems(&self, lines: &Lines) -> Vec<Problem> {
        let mut problems = Vec::new();
        for entry in self.entries() {
            let line = |field: &str| {
                let mut path = entry.section.path();
                path.extend([entry.key, field]);
                lines.line(&path)
            };
            let (section, key, param) = (entry.section, entry.key, entry.param);
            if param.source.trim().is_empty() {
                problems.push((
                    line("source"),
                    format!(
                        "[{section}] {key} source = {:?}: blank (allowed: where the value comes \
                         from: a datasheet, a paper figure, or \"estimate: ...\")",
                        param.source
                    ),
                ));
            }
            let Some(rule) = rule_for(section.pattern(), key) else {
                problems.push((
                    line("value"),
                    format!(
                        "[{section}] {key}: unknown key (known: {})",
                        ranges::keys_of(section.pattern()).join(", ")
                    ),
                ));
                continue;
            };
            if let Err(problem) = rule.allowed.check(param.value) {
                problems.push((
                    line("value"),
                    format!(
                        "[{section}] {key} = {}: {problem} (allowed: {})",
                        param.value, rule.allowed
                    ),
                ));
            }
        }
        problems
    }

    /// A completion is split at RCB boundaries, so it carries at least one RCB.
    fn completion_problem(&self, lines: &Lines) -> Option<Problem> {
        let (rcb, cpl) = (
            &self.pcie.read_completion_boundary,
            &self.pcie.completion_max_payload,
        );
        if cpl.value < rcb.value {
            return Some((
                lines.line(&["pcie", "completion_max_payload", "value"]),
                format!(
                    "[pcie] completion_max_payload = {}: smaller than read_completion_boundary \
                     ({}) (allowed: {}, at least the RCB)",
                    cpl.value,
                    rcb.value,
                    Allowed::PowerOfTwo { min: 64, max: 4096 }
                ),
            ));
        }
        None
    }

    /// A chip's worst-case latency is never below the typical value it bounds.
    fn chip_problems(&self, lines: &Lines) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (name, chip) in &self.chips {
            if chip.latency_max_ns.value < chip.latency_ns.value {
                problems.push((
                    lines.line(&["chips", name, "latency_max_ns", "value"]),
                    format!(
                        "[chips.{name}] latency_max_ns = {}: smaller than latency_ns ({}) \
                         (allowed: {}, at least the typical latency)",
                        chip.latency_max_ns.value,
                        chip.latency_ns.value,
                        Allowed::Time
                    ),
                ));
            }
        }
        problems
    }

    /// A spread's 99th percentile lies between its typical value and `MAX_TAIL` times it.
    fn spread_problems(&self, lines: &Lines) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut spreads = vec![(
            vec!["cpu".to_string()],
            "interrupt_delivery",
            &self.cpu.interrupt_delivery_ns,
            &self.cpu.interrupt_delivery_p99_ns,
        )];
        for (name, p) in &self.nvme {
            let section = vec!["nvme".to_string(), name.clone()];
            spreads.push((
                section.clone(),
                "read_latency",
                &p.read_latency_ns,
                &p.read_latency_p99_ns,
            ));
            spreads.push((
                section,
                "write_latency",
                &p.write_latency_ns,
                &p.write_latency_p99_ns,
            ));
        }
        for (section, key, typical, p99) in spreads {
            let max = typical.value * smartio_platform::variation::MAX_TAIL;
            if p99.value < typical.value || p99.value > max {
                let p99_key = format!("{key}_p99_ns");
                let mut path: Vec<&str> = section.iter().map(String::as_str).collect();
                path.extend([p99_key.as_str(), "value"]);
                problems.push((
                    lines.line(&path),
                    format!(
                        "[{}] {p99_key} = {}: outside {} ..= {max} (allowed: at least \
                         {key}_ns and at most {} times it)",
                        section.join("."),
                        p99.value,
                        typical.value,
                        smartio_platform::variation::MAX_TAIL
                    ),
                ));
            }
        }
        problems
    }
}

/// A problem of the calibration: the line it is on (when known) and what is wrong.
type Problem = (Option<usize>, String);
