//! A progress bar on standard error for runs that take a while, drawn only when standard
//! error is a terminal: a bar appears once a phase has run for a second, so short runs print
//! nothing extra, and output piped to a file or a test never contains one.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use smartio_workloads::progress::{ProgressSink, Unit};
use std::cell::RefCell;
use std::io::IsTerminal;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long a phase runs before its bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// Installs the terminal's progress bar for the rest of the program when standard error is
/// a terminal; `None` otherwise.
pub fn install_on_terminal() -> Option<smartio_workloads::progress::Installed> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(smartio_workloads::progress::install(
        Rc::new(Bar::default()),
    ))
}

#[derive(Default)]
struct Bar {
    current: RefCell<Option<(ProgressBar, Instant, bool)>>,
}

fn style(unit: Unit) -> ProgressStyle {
    let template = match unit {
        Unit::Items(_) => "{msg:>24} [{bar:30}] {human_pos}/{human_len} ({eta} left)",
        Unit::Bytes => "{msg:>24} [{bar:30}] {binary_bytes}/{binary_total_bytes} ({eta} left)",
        Unit::VirtualPs => "{msg:>24} [{bar:30}] {percent}% of the virtual run time ({eta} left)",
    };
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl ProgressSink for Bar {
    fn begin(&self, what: &str, total: u64, unit: Unit) {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        bar.set_style(style(unit));
        let message = match unit {
            Unit::Items(items) if items != what => format!("{what} ({items})"),
            _ => what.to_string(),
        };
        bar.set_message(message);
        *self.current.borrow_mut() = Some((bar, Instant::now(), false));
    }

    fn set(&self, done: u64) {
        if let Some((bar, started, shown)) = &mut *self.current.borrow_mut() {
            if !*shown && started.elapsed() >= SHOW_AFTER {
                bar.set_draw_target(ProgressDrawTarget::stderr());
                *shown = true;
            }
            bar.set_position(done);
        }
    }

    fn end(&self) {
        if let Some((bar, _, _)) = self.current.borrow_mut().take() {
            bar.finish_and_clear();
        }
    }

    fn line(&self, text: &str) {
        match &*self.current.borrow() {
            Some((bar, _, true)) => bar.suspend(|| eprintln!("{text}")),
            _ => eprintln!("{text}"),
        }
    }
}

/// A run estimated to take longer than this says so on a terminal before it starts.
const ANNOUNCE_AFTER_S: f64 = 10.0;

/// Says on standard error, when it is a terminal, how long a run is estimated to take if
/// that is more than [`ANNOUNCE_AFTER_S`] (its progress bar follows once a phase has run a
/// second).
pub fn announce(command: &str, estimate: &crate::budget::Estimate) {
    if estimate.wall_s > ANNOUNCE_AFTER_S && std::io::stderr().is_terminal() {
        eprintln!(
            "smartio: {command}: {}: estimated {} of wall time",
            estimate.work,
            crate::budget::seconds(estimate.wall_s)
        );
    }
}
