//! Where each key of a calibration file was written: a second pass over the TOML text (with
//! `toml_edit`, which keeps positions) that records the line of every entry
//! (`pcie.max_payload_size.value` → 20), so that a value rejected after parsing is reported at
//! its line.
//!
//! The typed parse ([`super::Calibration`]) is the authority on structure; this pass only
//! answers "which line". On a text it cannot parse (the typed parse would have failed first)
//! errors simply carry no line.

use smartio_fabric::spec::LineIndex;
use std::collections::BTreeMap;
use toml_edit::{ImDocument, Item, Table, Value};

/// The 1-based line of every key path of a TOML document.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lines {
    lines: BTreeMap<Vec<String>, usize>,
}

impl Lines {
    /// Records the line of every table and value in `text`; an unparsable text gives an
    /// empty map.
    pub fn of(text: &str) -> Lines {
        let mut lines = Lines::default();
        if let Ok(doc) = ImDocument::parse(text) {
            lines.table(&LineIndex::new(text), &mut Vec::new(), doc.as_table());
        }
        lines
    }

    /// The line of the entry at `path` (`["pcie", "max_payload_size", "value"]`).
    pub fn line(&self, path: &[&str]) -> Option<usize> {
        let key: Vec<String> = path.iter().map(|s| (*s).to_string()).collect();
        self.lines.get(&key).copied()
    }

    /// The deepest key written on `line`, as `[section] key` (`[cpu] mmio_issue_ns`), for
    /// an error the typed parse reports only by position.
    pub fn key_at(&self, line: usize) -> Option<String> {
        let path = self
            .lines
            .iter()
            .filter(|(_, &l)| l == line)
            .map(|(p, _)| p)
            .max_by_key(|p| p.len())?;
        // A parameter's own fields read as `latency_ns.value` under the parameter's section.
        let split = match path.last().map(String::as_str) {
            Some("value" | "source") if path.len() >= 3 => path.len() - 2,
            _ => path.len().saturating_sub(1),
        };
        let (section, key) = path.split_at(split);
        match (section.is_empty(), key.is_empty()) {
            (_, true) => None,
            (true, false) => Some(key.join(".")),
            (false, false) => Some(format!("[{}] {}", section.join("."), key.join("."))),
        }
    }

    fn record(&mut self, index: &LineIndex, path: &[String], span: Option<std::ops::Range<usize>>) {
        if let Some(span) = span {
            self.lines.insert(path.to_vec(), index.line_of(span.start));
        }
    }

    fn table(&mut self, index: &LineIndex, path: &mut Vec<String>, table: &Table) {
        for (key, item) in table.iter() {
            path.push(key.to_string());
            match item {
                Item::Table(t) => {
                    self.record(index, path, t.span());
                    self.table(index, path, t);
                }
                Item::Value(v) => self.value(index, path, v),
                Item::ArrayOfTables(_) | Item::None => {}
            }
            path.pop();
        }
    }

    fn value(&mut self, index: &LineIndex, path: &mut Vec<String>, value: &Value) {
        self.record(index, path, value.span());
        if let Value::InlineTable(t) = value {
            for (key, v) in t.iter() {
                path.push(key.to_string());
                self.value(index, path, v);
                path.pop();
            }
        }
    }
}

pub use smartio_fabric::spec::line_of;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_values_inside_inline_tables_and_sections_are_found() {
        let text = "[pcie]\n# comment\nmps = { value = 256, source = \"s\" }\n\n[chips.X]\nlatency_ns = { value = 1, source = \"t\" }\n[chips.Y.lut]\nvalue = 3\nsource = \"u\"\n";
        let lines = Lines::of(text);
        assert_eq!(lines.line(&["pcie", "mps", "value"]), Some(3));
        assert_eq!(lines.line(&["chips", "X", "latency_ns", "value"]), Some(6));
        assert_eq!(lines.line(&["chips", "X", "latency_ns", "source"]), Some(6));
        assert_eq!(lines.line(&["chips", "Y", "lut", "source"]), Some(9));
        assert_eq!(lines.line(&["chips", "Z"]), None);
    }

    #[test]
    fn an_unparsable_text_has_no_lines() {
        assert_eq!(Lines::of("[pcie\n"), Lines::default());
    }

    #[test]
    fn the_key_on_a_line_is_named_with_its_section() {
        let lines = Lines::of("[cpu]\nmmio_issue_ns = 50\n[pcie]\nmps = { value = 1 }\n");
        assert_eq!(lines.key_at(2).as_deref(), Some("[cpu] mmio_issue_ns"));
        assert_eq!(lines.key_at(4).as_deref(), Some("[pcie] mps.value"));
        assert_eq!(lines.key_at(1).as_deref(), Some("cpu"));
        assert_eq!(lines.key_at(9), None);
    }
}
