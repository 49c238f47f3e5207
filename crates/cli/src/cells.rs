//! The tables experiments, applications and `repro` print: a table in the style they share,
//! and numbers written into its cells.

use comfy_table::Table;

/// A new table in the style every experiment uses.
pub fn table(header: &[&str]) -> Table {
    let mut t = crate::render::table();
    t.set_header(header.to_vec());
    t
}

/// Nanoseconds with one decimal.
pub fn ns(v: f64) -> String {
    format!("{v:.1}")
}

/// Nanoseconds as milliseconds with three decimals.
pub fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}
