//! Errors of the layers above the host — a driver's, SmartIO's — kept whole inside the
//! host's own errors.
//!
//! Drivers and SmartIO live in crates above this one and reach it as `dyn Driver`,
//! `dyn BlockDriver` and `dyn DmaMapper`, so the host cannot name their error types. It keeps
//! their error as a [`ForeignError`]: the value itself (a caller that knows the type gets it
//! back with [`ForeignError::downcast_ref`]), shared so the host's errors stay `Clone`, and
//! compared by what it says so they stay comparable.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// A typed error of a layer above the host, shared.
///
/// Invariant: it displays exactly as the error it holds, and its [`Error::source`] is that
/// error's source, so an error chain reads as if the host's error held the error directly.
#[derive(Debug, Clone)]
pub struct ForeignError(Arc<dyn Error + Send + Sync>);

impl ForeignError {
    /// Keeps `error`.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        ForeignError(Arc::new(error))
    }

    /// Keeps an error already boxed (what [`crate::ProbeError`] and [`crate::IoError`] are).
    pub fn boxed(error: Box<dyn Error + Send + Sync>) -> Self {
        ForeignError(Arc::from(error))
    }

    /// The error held, if it is a `T`.
    pub fn downcast_ref<T: Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

impl fmt::Display for ForeignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Error for ForeignError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

/// The same error (one shared value), or two that say the same.
impl PartialEq for ForeignError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for ForeignError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("queue {qid} refused")]
    struct Refused {
        qid: u16,
        #[source]
        cause: std::io::Error,
    }

    #[test]
    fn it_displays_as_the_error_it_holds_gives_it_back_typed_and_skips_itself_in_the_chain() {
        let e = ForeignError::new(Refused {
            qid: 3,
            cause: std::io::Error::other("no room"),
        });
        assert_eq!(e.to_string(), "queue 3 refused");
        assert_eq!(e.downcast_ref::<Refused>().map(|r| r.qid), Some(3));
        assert!(e.downcast_ref::<std::io::Error>().is_none());
        assert_eq!(e.source().map(|s| s.to_string()), Some("no room".into()));
        let boxed: Box<dyn Error + Send + Sync> = Box::new(std::io::Error::other("gone"));
        let b = ForeignError::boxed(boxed);
        assert_eq!(b.to_string(), "gone");
        assert!(b.downcast_ref::<std::io::Error>().is_some());
    }

    #[test]
    fn copies_are_equal_and_so_are_errors_that_say_the_same() {
        let a = ForeignError::new(std::io::Error::other("x"));
        assert_eq!(a, a.clone());
        assert_eq!(a, ForeignError::new(std::io::Error::other("x")));
        assert_ne!(a, ForeignError::new(std::io::Error::other("y")));
    }
}
