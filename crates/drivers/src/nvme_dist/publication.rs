//! What the manager publishes about itself and the controller in its shared segment, and how
//! a client reads it when it bootstraps (seed 003 §V: "the manager also allocates a shared
//! memory segment associated with the controller with metadata about the manager, such as
//! which host it runs on"; "the client bootstraps itself by reading the shared memory
//! segment created by the manager").
//!
//! The segment is whole 4 KiB pages, little-endian:
//!
//! ```text
//!   offset  bytes  field
//!        0      8  magic, "1RGMEMVN" (MANAGER_MAGIC)
//!        8      8  the manager's host id
//!       16      8  I/O queue pairs the controller granted
//!       24      8  entries a queue may have (CAP.MQES + 1)
//!       32      8  largest transfer in bytes (from Identify's MDTS)
//!       40      8  active namespaces n, at most MAX_NAMESPACES (1024)
//!       48     40  model number (Identify MN, as the controller padded it)
//!       88      8  reserved, 0
//!       96   16·n  per namespace: nsid (4), LBA size in bytes (4), size in blocks (8)
//! ```
//!
//! A client reads the header, then the `n` namespace entries; what it decodes is checked
//! (magic, a count the segment holds, namespace ids and block sizes that a controller can
//! report) and refused with the field and the value otherwise.

use super::manager::MANAGER_MAGIC;
use crate::nvme::NamespaceInfo;
use smartio_fabric::HostId;
use smartio_platform::PAGE_SIZE;
use thiserror::Error;

/// Bytes of the fixed part, before the namespaces.
pub const HEADER_BYTES: usize = 96;

/// Bytes per namespace entry.
pub const NAMESPACE_BYTES: usize = 16;

/// Bytes of the model number field (Identify Controller's MN).
const MODEL_BYTES: usize = 40;

/// Most namespaces a publication lists: the 1024 ids one Identify Active Namespace ID list
/// holds, which is what the manager enumerates.
pub const MAX_NAMESPACES: usize = 1024;

/// What [`PublicationError::Field`] says the namespace count may be.
const NAMESPACES_ALLOWED: &str = "at most 1024 (one Identify active namespace list)";

/// The manager's metadata about itself and the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// The host the manager runs on (where clients send their requests).
    pub host: HostId,
    /// I/O queue pairs the controller granted.
    pub granted: u16,
    /// Entries a queue may have (CAP.MQES + 1).
    pub max_entries: u32,
    /// Largest transfer in bytes (MDTS).
    pub max_transfer: u64,
    /// Model number.
    pub model: String,
    /// Active namespaces.
    pub namespaces: Vec<NamespaceInfo>,
}

/// Why a published segment cannot be read as the manager's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PublicationError {
    /// Fewer bytes than the layout needs.
    #[error("{len} bytes, the layout needs {need}")]
    Short {
        /// Bytes given.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The first word is not the manager's magic.
    #[error("magic {found:#018x}, expected {MANAGER_MAGIC:#018x}")]
    Magic {
        /// What was there.
        found: u64,
    },
    /// A field holds a value outside its range.
    #[error("{field} = {value}: {allowed}")]
    Field {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it may be.
        allowed: &'static str,
    },
    /// Namespace entry `index` describes no namespace a controller reports.
    #[error("namespace entry {index}: {why}")]
    Namespace {
        /// Entry index.
        index: usize,
        /// What is wrong.
        why: String,
    },
}

fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

fn half(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(w)
}

impl Publication {
    /// The bytes as the manager writes them (see [`Publication::segment_bytes`] for the
    /// segment they need). Namespaces past [`MAX_NAMESPACES`] are refused, never dropped.
    pub fn encode(&self) -> Result<Vec<u8>, PublicationError> {
        if self.namespaces.len() > MAX_NAMESPACES {
            return Err(PublicationError::Field {
                field: "namespaces",
                value: self.namespaces.len() as u64,
                allowed: NAMESPACES_ALLOWED,
            });
        }
        let mut page = Vec::with_capacity(HEADER_BYTES + NAMESPACE_BYTES * self.namespaces.len());
        for w in [
            MANAGER_MAGIC,
            u64::from(self.host.0),
            u64::from(self.granted),
            u64::from(self.max_entries),
            self.max_transfer,
            self.namespaces.len() as u64,
        ] {
            page.extend_from_slice(&w.to_le_bytes());
        }
        let mut model = [b' '; MODEL_BYTES];
        let name = self.model.as_bytes();
        let n = name.len().min(MODEL_BYTES);
        model[..n].copy_from_slice(&name[..n]);
        page.extend_from_slice(&model);
        page.extend_from_slice(&0u64.to_le_bytes());
        for ns in &self.namespaces {
            page.extend_from_slice(&ns.nsid.to_le_bytes());
            page.extend_from_slice(&ns.lba_size.to_le_bytes());
            page.extend_from_slice(&ns.blocks.to_le_bytes());
        }
        Ok(page)
    }

    /// Bytes of the segment a publication of `namespaces` namespaces needs: whole pages.
    pub fn segment_bytes(namespaces: usize) -> u64 {
        ((HEADER_BYTES + NAMESPACE_BYTES * namespaces) as u64).next_multiple_of(PAGE_SIZE)
    }

    /// How many namespace entries follow a header, checked: what a client reads next.
    pub fn namespace_count(header: &[u8]) -> Result<usize, PublicationError> {
        if header.len() < HEADER_BYTES {
            return Err(PublicationError::Short {
                len: header.len(),
                need: HEADER_BYTES,
            });
        }
        let found = word(header, 0);
        if found != MANAGER_MAGIC {
            return Err(PublicationError::Magic { found });
        }
        let n = word(header, 40);
        if n > MAX_NAMESPACES as u64 {
            return Err(PublicationError::Field {
                field: "namespaces",
                value: n,
                allowed: NAMESPACES_ALLOWED,
            });
        }
        Ok(n as usize)
    }

    /// Decodes a header followed by its namespace entries.
    pub fn decode(bytes: &[u8]) -> Result<Publication, PublicationError> {
        let n = Self::namespace_count(bytes)?;
        let need = HEADER_BYTES + n * NAMESPACE_BYTES;
        if bytes.len() < need {
            return Err(PublicationError::Short {
                len: bytes.len(),
                need,
            });
        }
        let field = |field, value: u64, ok: bool, allowed| {
            if ok {
                Ok(value)
            } else {
                Err(PublicationError::Field {
                    field,
                    value,
                    allowed,
                })
            }
        };
        let host = word(bytes, 8);
        let host = field(
            "host",
            host,
            host <= u64::from(u32::MAX),
            "a host id (32 bits)",
        )?;
        let granted = word(bytes, 16);
        let granted = field(
            "granted",
            granted,
            (1..=65535).contains(&granted),
            "1 to 65535 queue pairs",
        )?;
        let entries = word(bytes, 24);
        let entries = field(
            "max_entries",
            entries,
            (2..=65536).contains(&entries),
            "2 to 65536 (CAP.MQES + 1)",
        )?;
        let mdts = word(bytes, 32);
        let mdts = field(
            "max_transfer",
            mdts,
            mdts >= PAGE_SIZE && mdts.is_power_of_two(),
            "a power of two of at least 4096 bytes",
        )?;
        let model = String::from_utf8_lossy(&bytes[48..48 + MODEL_BYTES])
            .trim()
            .to_string();
        let mut namespaces = Vec::with_capacity(n);
        for index in 0..n {
            let at = HEADER_BYTES + index * NAMESPACE_BYTES;
            let ns = NamespaceInfo {
                nsid: half(bytes, at),
                lba_size: half(bytes, at + 4),
                blocks: word(bytes, at + 8),
            };
            let why = if ns.nsid == 0 || ns.nsid == u32::MAX {
                Some(format!("namespace id {:#x} is not a namespace", ns.nsid))
            } else if ns.lba_size < 512 || !ns.lba_size.is_power_of_two() {
                Some(format!(
                    "LBA size {} is not a power of two of at least 512",
                    ns.lba_size
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(PublicationError::Namespace { index, why });
            }
            namespaces.push(ns);
        }
        Ok(Publication {
            // Checked above to fit.
            host: HostId(host as u32),
            granted: granted as u16,
            max_entries: entries as u32,
            max_transfer: mdts,
            model,
            namespaces,
        })
    }

    /// Namespace `nsid`, if the controller has it.
    pub fn namespace(&self, nsid: u32) -> Option<NamespaceInfo> {
        self.namespaces.iter().find(|n| n.nsid == nsid).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Publication {
        Publication {
            host: HostId(3),
            granted: 31,
            max_entries: 4096,
            max_transfer: 128 << 10,
            model: "smartio emulated NVMe".into(),
            namespaces: vec![
                NamespaceInfo {
                    nsid: 1,
                    blocks: 732_421_875,
                    lba_size: 512,
                },
                NamespaceInfo {
                    nsid: 2,
                    blocks: 1 << 20,
                    lba_size: 4096,
                },
            ],
        }
    }

    #[test]
    fn a_publication_reads_back_as_it_was_written() {
        let page = sample().encode().expect("fits");
        assert_eq!(page.len(), HEADER_BYTES + 2 * NAMESPACE_BYTES);
        assert_eq!(Publication::namespace_count(&page[..HEADER_BYTES]), Ok(2));
        assert_eq!(Publication::decode(&page), Ok(sample()));
    }

    #[test]
    fn a_page_without_the_magic_or_cut_short_is_refused() {
        let mut page = sample().encode().expect("fits");
        assert_eq!(
            Publication::decode(&page[..HEADER_BYTES + 20]),
            Err(PublicationError::Short {
                len: 116,
                need: 128
            })
        );
        assert!(matches!(
            Publication::decode(&page[..10]),
            Err(PublicationError::Short { len: 10, need: 96 })
        ));
        page[0] ^= 1;
        let e = Publication::decode(&page).expect_err("magic");
        assert!(
            e.to_string()
                .starts_with("magic 0x4e564d454d475230, expected"),
            "{e}"
        );
    }

    #[test]
    fn counts_and_namespaces_outside_their_ranges_are_refused_by_field() {
        let page = sample().encode().expect("fits");
        let with = |at: usize, bytes: &[u8]| {
            let mut p = page.clone();
            p[at..at + bytes.len()].copy_from_slice(bytes);
            Publication::decode(&p).expect_err("refused").to_string()
        };
        assert_eq!(
            with(40, &1025u64.to_le_bytes()),
            "namespaces = 1025: at most 1024 (one Identify active namespace list)"
        );
        assert_eq!(
            with(16, &0u64.to_le_bytes()),
            "granted = 0: 1 to 65535 queue pairs"
        );
        assert_eq!(
            with(32, &6000u64.to_le_bytes()),
            "max_transfer = 6000: a power of two of at least 4096 bytes"
        );
        assert_eq!(
            with(HEADER_BYTES, &0u32.to_le_bytes()),
            "namespace entry 0: namespace id 0x0 is not a namespace"
        );
        assert_eq!(
            with(HEADER_BYTES + NAMESPACE_BYTES + 4, &520u32.to_le_bytes()),
            "namespace entry 1: LBA size 520 is not a power of two of at least 512"
        );
    }

    #[test]
    fn more_namespaces_than_an_identify_list_holds_are_not_published() {
        let mut p = sample();
        p.namespaces = vec![p.namespaces[0]; MAX_NAMESPACES + 1];
        assert_eq!(
            p.encode(),
            Err(PublicationError::Field {
                field: "namespaces",
                value: 1025,
                allowed: NAMESPACES_ALLOWED
            })
        );
        p.namespaces.pop();
        let bytes = p.encode().expect("1024 fit");
        assert_eq!(bytes.len(), 96 + 16 * 1024);
        assert_eq!(
            Publication::decode(&bytes).map(|d| d.namespaces.len()),
            Ok(1024)
        );
        // Five pages; one namespace fits one.
        assert_eq!(Publication::segment_bytes(1024), 5 * PAGE_SIZE);
        assert_eq!(Publication::segment_bytes(1), PAGE_SIZE);
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Publication::decode(&bytes);
        }

        #[test]
        fn decoding_a_valid_header_with_any_entries_never_panics(
            tail in proptest::collection::vec(any::<u8>(), 0..200),
            n in 0u64..1100,
        ) {
            let mut page = sample().encode().expect("fits");
            page.truncate(HEADER_BYTES);
            page[40..48].copy_from_slice(&n.to_le_bytes());
            page.extend_from_slice(&tail);
            let _ = Publication::decode(&page);
        }
    }
}
