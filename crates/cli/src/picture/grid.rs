//! The hosts under one cluster switch (or under none) in a grid: columns as wide as their
//! widest host, rows as tall as their tallest, and right of each column a channel for every
//! line leaving a host below the first row, up to the band above the first row.

use super::geometry::{count, Course, Line, Point};
use super::host::{port_kind, HostDrawing, Port};
use super::parts::{under_line, Lending};
use std::collections::BTreeMap;

/// Least room between two columns of hosts (and between two rows).
const MIN_COLUMN_GAP: i64 = 28;
/// A channel's offset right of its column, and between two channels.
const CHANNEL_PAD: i64 = 8;
const CHANNEL_STEP: i64 = 5;
/// How far above its host a line turns towards its channel, and between two of one host.
const ROUTE_DY: i64 = 8;
const ROUTE_STEP: i64 = 5;
/// How far above the first row a channel ends.
pub const EXIT_RISE: i64 = 6;

/// The hosts under one cluster switch (or under none), in a grid.
pub struct Group {
    pub switch: Option<usize>,
    pub hosts: Vec<usize>,
    pub cols: usize,
    /// The widest host of each column.
    pub col_w: Vec<i64>,
    pub gap: i64,
    /// Height of each row, and the room above each row but the first.
    pub row_h: Vec<i64>,
    pub row_band: i64,
    /// The hosts' part of the block, and the whole block (with the last column's channels
    /// and room for its switch).
    pub hosts_w: i64,
    pub block_w: i64,
    pub x: i64,
}

impl Group {
    pub fn new(switch: Option<usize>, hosts: Vec<usize>, drawings: &[HostDrawing]) -> Group {
        let n = hosts.len().max(1);
        let cols = n.min(ceil_sqrt(n).max(4));
        let rows = n.div_ceil(cols);
        let mut col_w = vec![0; cols];
        let mut row_h = vec![0; rows];
        // Lines from rows below the first climb in channels right of their column.
        let mut slots = vec![0i64; cols];
        let mut ports_most = 0i64;
        for (k, &h) in hosts.iter().enumerate() {
            let (r, c) = (k / cols, k % cols);
            row_h[r] = row_h[r].max(drawings[h].height);
            col_w[c] = col_w[c].max(drawings[h].width);
            if r > 0 {
                let ports = count(drawings[h].ports.len());
                slots[c] += ports;
                ports_most = ports_most.max(ports);
            }
        }
        let most = slots.iter().copied().max().unwrap_or(0);
        let gap = MIN_COLUMN_GAP.max(2 * CHANNEL_PAD + CHANNEL_STEP * most);
        let row_band = (2 * ROUTE_DY + ROUTE_STEP * ports_most).max(MIN_COLUMN_GAP);
        let cols_i = count(cols);
        let hosts_w = col_w.iter().sum::<i64>() + (cols_i - 1) * gap;
        let block_w = if rows > 1 { hosts_w + gap } else { hosts_w };
        Group {
            switch,
            hosts,
            cols,
            col_w,
            gap,
            row_h,
            row_band,
            hosts_w,
            block_w,
            x: 0,
        }
    }

    /// The top of row `r`, from the first row's top.
    pub fn row_top(&self, r: usize) -> i64 {
        self.row_h[..r].iter().map(|h| h + self.row_band).sum()
    }

    /// The left edge of column `c`.
    pub fn col_x(&self, c: usize) -> i64 {
        self.x + self.col_w[..c].iter().map(|w| w + self.gap).sum::<i64>()
    }

    /// The top-left corner of the `k`th host's cell.
    pub fn cell(&self, k: usize, y_hosts: i64) -> (i64, i64) {
        let (r, c) = (k / self.cols, k % self.cols);
        (self.col_x(c), y_hosts + self.row_top(r))
    }
}

fn ceil_sqrt(n: usize) -> usize {
    let mut r = 0;
    while r * r < n {
        r += 1;
    }
    r
}

impl Group {
    /// Puts each host of the group in its cell, the first row's top at `y_hosts`: notes its
    /// corner in `host_at` and, for each of its ports, where its line reaches the band above
    /// the first row in `exits` (a port of the first row is its own exit; from a lower row a
    /// line climbs its channel, added to `lines`).
    pub fn place(
        &self,
        drawings: &[HostDrawing],
        lendings: &[Lending],
        y_hosts: i64,
        host_at: &mut [(i64, i64)],
        exits: &mut BTreeMap<Port, Point>,
        lines: &mut Vec<Line>,
    ) {
        let g = self;
        let mut slot = vec![0i64; g.cols];
        for (k, &h) in g.hosts.iter().enumerate() {
            let (hx, hy) = g.cell(k, y_hosts);
            host_at[h] = (hx, hy);
            let (r, c) = (k / g.cols, k % g.cols);
            for (i, &(port, lane)) in drawings[h].ports.iter().enumerate() {
                let at = Point::new(hx + lane, hy);
                if r == 0 {
                    exits.insert(port, at);
                    continue;
                }
                let turn = hy - ROUTE_DY - ROUTE_STEP * count(i);
                let channel = g.col_x(c) + g.col_w[c] + CHANNEL_PAD + CHANNEL_STEP * slot[c];
                slot[c] += 1;
                let exit = Point::new(channel, y_hosts - EXIT_RISE);
                lines.push(under_line(
                    port_kind(port, lendings),
                    Course::Polyline(vec![
                        at,
                        Point::new(at.x, turn),
                        Point::new(channel, turn),
                        exit,
                    ]),
                ));
                exits.insert(port, exit);
            }
        }
    }
}
