//! libsisci: a C library source compatible with programs written for the public SISCI API,
//! running them on smartio's live engine.
//!
//! The headers are `include/sisci_api.h`, `include/sisci_types.h`, `include/sisci_error.h`
//! (and `include/dis/dis_types.h`); `smartio cluster install --prefix P` puts them and the
//! library in SISCI's layout. A program's descriptor is a connection to the cluster daemon
//! (`smartio cluster up`) as a program of the host in `SMARTIO_HOST`; a map is the daemon's
//! shared memory mapped into the program. See docs/sisci.md.

pub mod client;
pub mod code;
mod ffi;

/// The headers, by their path under the install prefix.
pub const HEADERS: [(&str, &str); 4] = [
    (
        "include/sisci_api.h",
        include_str!("../include/sisci_api.h"),
    ),
    (
        "include/sisci_types.h",
        include_str!("../include/sisci_types.h"),
    ),
    (
        "include/sisci_error.h",
        include_str!("../include/sisci_error.h"),
    ),
    (
        "include/dis/dis_types.h",
        include_str!("../include/dis/dis_types.h"),
    ),
];
