//! The crate's integration tests, one module per file, in one test binary.

mod nvmeof;
