//! Physical Region Page (PRP) entries (NVMe 1.4 §4.3): how a command's data pointer describes
//! a buffer in memory pages.
//!
//! PRP1 addresses the first byte (any dword-aligned offset into its page); every later page
//! is addressed from its start. A transfer touching two pages puts the second in PRP2; one
//! touching more puts a PRP list pointer in PRP2, and a list page whose entries do not
//! suffice ends with a pointer to the next list page.
//!
//! ```text
//!  PRP1 ──► [page 0 from offset]      PRP2 ──► list page ┌ page 1
//!                                                        │ page 2
//!                                                        │ …
//!                                                        └ next list page ──► ┌ page k …
//! ```
//!
//! - [`build`](mod@build): the driver's side, pure — the entries and list pages for a buffer.
//! - [`walk`]: the controller's side — the memory ranges a command's PRPs describe.

pub mod build;
pub mod walk;

pub use build::{build, list_pages_needed, ListPage, PrpError, Prps};
pub use walk::{segments, segments_into, Segment};
