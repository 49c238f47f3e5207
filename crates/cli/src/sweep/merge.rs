//! Joins the JSON lines of a sweep's shards into the lines the whole sweep would have
//! written: every run of the grid exactly once, each line the one its shard wrote, in the
//! grid's order. Lines are checked against the grid they claim to come from.

use super::error::{LineAt, SweepError};
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

/// The merged lines of `parts` (`(file name, text)`), checked against `grid`.
pub fn merge(grid: &Grid, parts: &[(String, String)]) -> Result<Vec<String>, SweepError> {
    let total = grid.runs.len();
    let mut lines: Vec<Option<(LineAt, &str)>> = vec![None; total];
    for (file, text) in parts {
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let at = LineAt {
                file: file.clone(),
                line: n + 1,
            };
            let head: Head = match serde_json::from_str(line) {
                Ok(head) => head,
                Err(source) => return Err(SweepError::NotALine { at, source }),
            };
            check_line(grid, &at, &head)?;
            let slot = &mut lines[head.index];
            if let Some((first, _)) = slot {
                return Err(SweepError::Overlap {
                    at,
                    index: head.index,
                    first: first.clone(),
                });
            }
            *slot = Some((at, line));
        }
    }
    let missing: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_none())
        .map(|(i, _)| i)
        .collect();
    if !missing.is_empty() {
        return Err(SweepError::Missing { missing, total });
    }
    Ok(lines
        .into_iter()
        .flatten()
        .map(|(_, l)| l.to_string())
        .collect())
}

/// Checks the line `head` at `at` against the run of `grid` it claims to be.
fn check_line(grid: &Grid, at: &LineAt, head: &Head) -> Result<(), SweepError> {
    let total = grid.runs.len();
    if head.sweep != grid.name || head.runs != total {
        return Err(SweepError::OtherSweep {
            at: at.clone(),
            sweep: head.sweep.clone(),
            runs: head.runs,
            grid: grid.name.clone(),
            total,
        });
    }
    let expected = grid.runs.get(head.index).ok_or(SweepError::Beyond {
        at: at.clone(),
        index: head.index,
        total,
    })?;
    if head.argv != expected.argv {
        return Err(SweepError::OtherArgv {
            at: at.clone(),
            index: head.index,
            argv: head.argv.clone(),
            expected: expected.argv.clone(),
        });
    }
    if head.params != expected.params {
        return Err(SweepError::OtherParams {
            at: at.clone(),
            index: head.index,
        });
    }
    if head.result.is_some() == head.error.is_some() {
        return Err(SweepError::ResultOrError {
            at: at.clone(),
            index: head.index,
            both: head.error.is_some(),
        });
    }
    Ok(())
}
