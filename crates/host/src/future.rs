//! The boxed future that the host's traits return (drivers, device backends, block drivers):
//! the engine's executor is single-threaded, so it need not be `Send`.

use std::future::Future;
use std::pin::Pin;

/// A boxed future of the engine's single-threaded executor.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;
