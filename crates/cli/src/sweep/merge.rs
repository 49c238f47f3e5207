//! Joins the JSON lines of a sweep's shards into the lines the whole sweep would have
//! written: every run of the grid exactly once, each line the one its shard wrote, in the
//! grid's order. Lines are checked against the grid they claim to come from.

use super::grid::Grid;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The part of a line the merge checks.
#[derive(Debug, Deserialize)]
struct Head {
    sweep: String,
    index: usize,
    runs: usize,
    params: BTreeMap<String, serde_json::Value>,
    argv: Vec<String>,
    result: Option<serde_json::Value>,
    error: Option<String>,
}

/// Most missing runs a message lists.
const LISTED: usize = 10;

/// The merged lines of `parts` (`(file name, text)`), checked against `grid`.
pub fn merge(grid: &Grid, parts: &[(String, String)]) -> Result<Vec<String>, String> {
    let total = grid.runs.len();
    let mut lines: Vec<Option<(String, &str)>> = vec![None; total];
    for (file, text) in parts {
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let at = format!("{file}:{}", n + 1);
            let head: Head = serde_json::from_str(line)
                .map_err(|e| format!("{at}: not a sweep's line ({e})"))?;
            if head.sweep != grid.name || head.runs != total {
                return Err(format!(
                    "{at}: a line of sweep {:?} with {} runs, not of {:?} with {total}",
                    head.sweep, head.runs, grid.name
                ));
            }
            let expected = grid
                .runs
                .get(head.index)
                .ok_or_else(|| format!("{at}: run {} is beyond the grid's {total}", head.index))?;
            if head.argv != expected.argv {
                return Err(format!(
                    "{at}: run {} ran `{}`, the grid's run {} is `{}` (a different grid?)",
                    head.index,
                    head.argv.join(" "),
                    head.index,
                    expected.argv.join(" ")
                ));
            }
            if head.params != expected.params {
                return Err(format!(
                    "{at}: run {} has other params than the grid's run {} (a different grid?)",
                    head.index, head.index
                ));
            }
            if head.result.is_some() == head.error.is_some() {
                return Err(format!(
                    "{at}: run {} has {} (a run's line has its result or its error)",
                    head.index,
                    if head.error.is_some() {
                        "both a result and an error"
                    } else {
                        "neither a result nor an error"
                    }
                ));
            }
            let slot = &mut lines[head.index];
            if let Some((first, _)) = slot {
                return Err(format!(
                    "{at}: run {} is also in {first} (overlapping shards?)",
                    head.index
                ));
            }
            *slot = Some((at, line));
        }
    }
    let missing: Vec<String> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_none())
        .map(|(i, _)| i.to_string())
        .collect();
    if !missing.is_empty() {
        let shown = missing
            .iter()
            .take(LISTED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let more = missing.len().saturating_sub(LISTED);
        return Err(format!(
            "{} of {total} runs missing: {shown}{} (a shard not run or not given?)",
            missing.len(),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    Ok(lines
        .into_iter()
        .flatten()
        .map(|(_, l)| l.to_string())
        .collect())
}
