//! `smartio sweep`'s options: `sweep run` (a grid, `--shard I/N`, `--jobs`, `--out`) and
//! `sweep merge` (a grid and its shards' files), each value checked as it is parsed.

use crate::value_error::ValueError;

/// Most shards one sweep may be split into.
pub const MAX_SHARDS: usize = 10_000;

/// Most worker threads.
pub const MAX_JOBS: u16 = 256;

#[derive(clap::Subcommand, Debug)]
pub enum Sweep {
    /// Run a grid's runs (or one shard of them) in parallel: one JSON line per run, in the
    /// grid's order; with --out, the lines go to that file and a summary table is printed.
    Run(RunArgs),
    /// Join the JSON lines of a sweep's shards into the lines of the whole sweep, each run
    /// once, checked against the grid.
    Merge(MergeArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The grid: a TOML file, or a shipped grid's name (qd1-seeds).
    pub grid: String,
    /// Run only shard I of N (0 <= I < N <= 10000): the runs whose index modulo N is I.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<Shard>,
    /// Worker threads, each running one run at a time, 1 to 256 (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_JOBS)))]
    pub jobs: Option<u16>,
    /// Write the JSON lines to this file and print a summary table (default: the lines on
    /// standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The grid the shards ran: a TOML file or a shipped grid's name.
    pub grid: String,
    /// The shards' JSON-lines files (--out of each `sweep run --shard`).
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<String>,
    /// Write the merged lines to this file (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
}

/// One shard of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which one (0-based).
    pub index: usize,
    /// Of how many.
    pub count: usize,
}

fn parse_shard(s: &str) -> Result<Shard, ValueError> {
    let bad = || ValueError::Shard { max: MAX_SHARDS };
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let index: usize = i.trim().parse().map_err(|_| bad())?;
    let count: usize = n.trim().parse().map_err(|_| bad())?;
    if count == 0 || count > MAX_SHARDS || index >= count {
        return Err(bad());
    }
    Ok(Shard { index, count })
}

impl RunArgs {
    /// The workers the sweep runs on: `--jobs`, or one per core.
    pub fn workers(&self) -> usize {
        match self.jobs {
            Some(j) => usize::from(j),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// Whether run `index` of the grid is in this shard (every run when no `--shard`).
    pub fn in_shard(&self, index: usize) -> bool {
        self.shard.is_none_or(|s| index % s.count == s.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_i_of_n_with_i_below_n() {
        assert_eq!(parse_shard("0/3"), Ok(Shard { index: 0, count: 3 }));
        assert_eq!(parse_shard("2/3"), Ok(Shard { index: 2, count: 3 }));
        for bad in ["3/3", "0/0", "1", "a/3", "-1/3", "0/10001", ""] {
            let e = parse_shard(bad).expect_err(bad).to_string();
            assert!(e.contains("0 <= I < N <= 10000"), "{bad}: {e}");
        }
    }
}
