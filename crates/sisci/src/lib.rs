//! libsisci: a C library source compatible with programs written for the public SISCI API,
//! running them on smartio's live engine.
//!
//! The headers are `include/sisci_api.h`, `include/sisci_types.h`, `include/sisci_error.h`
//! (and `include/dis/dis_types.h`); `smartio cluster install --prefix P` puts them and the
//! library in SISCI's layout. A program's descriptor is a connection to the cluster daemon
//! (`smartio cluster up`) as a program of the host in `SMARTIO_HOST`; a map is the daemon's
//! shared memory mapped into the program. See docs/sisci.md.
//!
//! # Inside this crate
//!
//! The C library (`cdylib` named `sisci`, so `libsisci.so`, plus an `rlib` for tests) and its
//! headers (`include/`: `sisci_api.h`, `sisci_types.h`, `sisci_error.h`, `dis/dis_types.h`),
//! written from the public API's shapes; `smartio cluster install --prefix DIR` lays them out as
//! Dolphin's installation does. `client` is the safe side — a `Descriptor` is a connection to the
//! daemon (plus auxiliary connections for calls that wait, attached by the descriptor's token),
//! objects are daemon handles plus what the process holds (a `Map`'s mapping). `ffi` is every C
//! call and every `unsafe` of the crate: handles are boxed client objects, freed only when the
//! call that ends them succeeded; NULL pointers are `SCI_ERR_ILLEGAL_PARAMETER`; callbacks run on
//! a thread of the library. `code` holds the error values the library returns itself; the
//! daemon's come from `smartio::SciErrorClass::code`, and a test reads the header and checks both.
//! What is supported and what each unsupported call returns: sisci.md (`docs/sisci.md`).

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
