//! Register pages: a device's BAR as shared memory a program maps.
//!
//! A program's loads and stores to a mapped BAR are plain memory operations here, so the
//! daemon keeps each mapped BAR in a memory file and watches it: a dword that differs from
//! what the daemon last saw there is a store, delivered to the device model
//! ([`DirectEngine::store_to_bar`]); a register whose value the device changes is written
//! back into the page ([`DirectEngine::load_from_bar`]) unless the program stored to it
//! meanwhile (the program's store wins and is delivered next). Registers the device does
//! not let be read keep what the program last stored. NVMe doorbells read as the queue's
//! pointer (0 once the queue is deleted), so a program that makes a queue another program
//! used before has its first store seen, even while a third keeps the BAR mapped.
//!
//! What this cannot see, and so the live engine does not model: a store of the value a
//! register already shows (it changes nothing in the page), and the order of stores to
//! different registers between two looks (they are delivered in address order; NVMe's
//! enable, doorbells and queue registers do not depend on it, since the controller acts on
//! them in its own task after the stores are in).

use crate::shm::{Mapping, ShmError};
use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
use smartio_direct::DirectEngine;
use smartio_fabric::EndpointId;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// The largest BAR kept as a register page (device memory BARs of GPUs are not).
pub const MAX_PAGE_BYTES: u64 = 1 << 20;

/// How often registers are read back into a page when nothing was stored.
const REFRESH: Duration = Duration::from_millis(1);

/// One BAR of one device, as a memory file.
struct Page {
    file: OwnedFd,
    map: Mapping,
    /// What the daemon last saw (or put) in each dword.
    shadow: Vec<u32>,
    /// What the device last answered for each dword; `None`: it does not answer reads.
    answered: Vec<Option<u32>>,
    /// Maps of it that programs hold.
    users: usize,
    refreshed: Instant,
}

/// The register pages of the cluster, by device and BAR.
#[derive(Default)]
pub struct RegisterPages {
    pages: BTreeMap<(EndpointId, u8), Page>,
}

impl RegisterPages {
    /// The page of `endpoint`'s BAR `bar` of `size` bytes for one more map (made the first
    /// time, with what the device's registers read).
    pub fn open(
        &mut self,
        engine: &DirectEngine,
        endpoint: EndpointId,
        bar: u8,
        size: u64,
    ) -> Result<BorrowedFd<'_>, ShmError> {
        let page = match self.pages.entry((endpoint, bar)) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Page::new(engine, endpoint, bar, size)?)
            }
        };
        if page.users == 0 {
            // Mapped again after nobody did: it shows the registers as they are now, and
            // what the device does not let be read (doorbells) as zero, so the next
            // program's first store is seen whatever the last one left there.
            page.reset(engine, endpoint, bar);
        }
        page.users += 1;
        Ok(page.file.as_fd())
    }

    /// One map of the page fewer; a page nobody maps is not watched.
    pub fn close(&mut self, endpoint: EndpointId, bar: u8) {
        if let Some(p) = self.pages.get_mut(&(endpoint, bar)) {
            p.users = p.users.saturating_sub(1);
        }
    }

    /// The memory file of a page.
    pub fn fd(&self, endpoint: EndpointId, bar: u8) -> Option<BorrowedFd<'_>> {
        self.pages.get(&(endpoint, bar)).map(|p| p.file.as_fd())
    }

    /// Whether any page is mapped (the daemon then looks often).
    pub fn watched(&self) -> bool {
        self.pages.values().any(|p| p.users > 0)
    }

    /// Delivers every store found in a mapped page and refreshes what the device changed;
    /// returns whether a store was delivered.
    pub fn poll(&mut self, engine: &DirectEngine) -> bool {
        let mut stored = false;
        for (&(endpoint, bar), page) in &mut self.pages {
            if page.users > 0 {
                stored |= page.poll(engine, endpoint, bar);
            }
        }
        stored
    }
}

impl Page {
    fn new(
        engine: &DirectEngine,
        endpoint: EndpointId,
        bar: u8,
        size: u64,
    ) -> Result<Page, ShmError> {
        let len = size.max(4096).next_multiple_of(4096);
        let error = |source| ShmError::Create {
            name: format!("BAR{bar}"),
            size: len,
            source,
        };
        let file = memfd_create(format!("smartio-bar{bar}"), MemfdFlags::CLOEXEC).map_err(error)?;
        ftruncate(&file, len).map_err(error)?;
        let map = Mapping::new(file.as_fd(), 0, len)?;
        let dwords = (size / 4) as usize;
        let mut page = Page {
            file,
            map,
            shadow: vec![0; dwords],
            answered: vec![None; dwords],
            users: 0,
            refreshed: Instant::now(),
        };
        page.reset(engine, endpoint, bar);
        Ok(page)
    }

    fn reset(&mut self, engine: &DirectEngine, endpoint: EndpointId, bar: u8) {
        for i in 0..self.shadow.len() {
            let v = read(engine, endpoint, bar, i);
            let shown = v.unwrap_or(0);
            self.map.write(4 * i as u64, &shown.to_le_bytes());
            self.shadow[i] = shown;
            self.answered[i] = v;
        }
        self.refreshed = Instant::now();
    }

    fn poll(&mut self, engine: &DirectEngine, endpoint: EndpointId, bar: u8) -> bool {
        let mut stores = Vec::new();
        for (i, seen) in self.shadow.iter_mut().enumerate() {
            let now = self.map.load_u32(4 * i as u64);
            if now != *seen {
                *seen = now;
                stores.push((i, now));
            }
        }
        for &(i, value) in &stores {
            let offset = 4 * i as u64;
            if engine
                .store_to_bar(endpoint, bar, offset, &value.to_le_bytes())
                .is_err()
            {
                // Refused (a read-only register): the page shows the register again.
                let shown = self.answered[i].unwrap_or(0);
                if self.map.replace_u32(offset, value, shown) {
                    self.shadow[i] = shown;
                }
            }
        }
        if !stores.is_empty() || self.refreshed.elapsed() >= REFRESH {
            self.refresh(engine, endpoint, bar);
        }
        !stores.is_empty()
    }

    /// Writes into the page every register the device now answers differently.
    fn refresh(&mut self, engine: &DirectEngine, endpoint: EndpointId, bar: u8) {
        self.refreshed = Instant::now();
        for i in 0..self.shadow.len() {
            let Some(before) = self.answered[i] else {
                continue;
            };
            let Some(now) = read(engine, endpoint, bar, i) else {
                continue;
            };
            if now != before {
                self.answered[i] = Some(now);
                if self.map.replace_u32(4 * i as u64, self.shadow[i], now) {
                    self.shadow[i] = now;
                }
            }
        }
    }
}

/// Dword `i` of the BAR as the device answers it, if it answers.
fn read(engine: &DirectEngine, endpoint: EndpointId, bar: u8, i: usize) -> Option<u32> {
    let mut buf = [0u8; 4];
    engine
        .load_from_bar(endpoint, bar, 4 * i as u64, &mut buf)
        .ok()
        .map(|()| u32::from_le_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::Daemon;
    use smartio_calibration::Calibration;

    /// NVMe controller registers (NVMe 1.4 §3.1): VS, INTMS and INTMC (each reads the
    /// interrupt mask), and BAR0's size.
    const VS: u64 = 0x08;
    const INTMS: u64 = 0x0c;
    const INTMC: u64 = 0x10;
    const BAR0_SIZE: u64 = 16 << 10;
    /// VS of an NVMe 1.4 controller.
    const NVME_1_4: u32 = 0x0001_0400;

    /// A daemon on back-to-back (its files in a directory of test `name`'s) and the lender's
    /// NVMe controller.
    fn daemon_and_nvme(name: &str) -> (Daemon, EndpointId) {
        let dir =
            std::env::temp_dir().join(format!("smartio-live-pages-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory");
        let d = Daemon::up(
            "back-to-back",
            &Calibration::default_embedded(),
            dir.join("cluster.sock").to_str().expect("utf-8"),
        )
        .expect("the daemon starts");
        let nvme = d
            .cluster
            .machine
            .fabric()
            .endpoints()
            .iter()
            .position(|e| e.name == "nvme0")
            .expect("the lender's NVMe controller");
        (d, EndpointId(nvme as u32))
    }

    /// What the device answers for the dword at `offset` of BAR0.
    fn device_reads(d: &Daemon, nvme: EndpointId, offset: u64) -> u32 {
        let mut buf = [0u8; 4];
        d.engine
            .load_from_bar(nvme, 0, offset, &mut buf)
            .expect("a register");
        u32::from_le_bytes(buf)
    }

    /// A program's map of the page.
    fn program_map(pages: &mut RegisterPages, d: &Daemon, nvme: EndpointId) -> Mapping {
        let fd = pages.open(&d.engine, nvme, 0, BAR0_SIZE).expect("a page");
        Mapping::new(fd, 0, BAR0_SIZE).expect("maps")
    }

    #[test]
    fn a_store_in_the_page_reaches_the_device_and_what_it_changes_shows_in_the_page() {
        let (d, nvme) = daemon_and_nvme("stores");
        let mut pages = RegisterPages::default();
        assert!(!pages.watched(), "no page yet");
        assert!(pages.fd(nvme, 0).is_none());
        let program = program_map(&mut pages, &d, nvme);
        assert!(pages.watched());
        assert!(pages.fd(nvme, 0).is_some());
        assert_eq!(
            program.load_u32(VS),
            NVME_1_4,
            "the page shows the registers"
        );
        assert!(!pages.poll(&d.engine), "nothing stored yet");
        // INTMS sets mask bits; INTMC, which reads the mask too, shows them after the store.
        program.write(INTMS, &5u32.to_le_bytes());
        assert!(pages.poll(&d.engine), "a store delivered");
        assert_eq!(device_reads(&d, nvme, INTMS), 5);
        assert_eq!(program.load_u32(INTMC), 5, "refreshed after the store");
        // A store to INTMC clears a bit: the device's INTMS changes, and so does the page's.
        program.write(INTMC, &1u32.to_le_bytes());
        assert!(pages.poll(&d.engine));
        assert_eq!(device_reads(&d, nvme, INTMS), 4);
        assert_eq!(program.load_u32(INTMS), 4);
        assert_eq!(program.load_u32(INTMC), 4);
        // A store the device refuses (VS is read-only): the page shows the register again.
        program.write(VS, &0xdead_beefu32.to_le_bytes());
        pages.poll(&d.engine);
        assert_eq!(program.load_u32(VS), NVME_1_4);
        assert!(!pages.poll(&d.engine), "nothing more stored");
    }

    #[test]
    fn a_register_the_device_changes_shows_in_the_page_within_a_refresh_without_a_store() {
        let (d, nvme) = daemon_and_nvme("refresh");
        let mut pages = RegisterPages::default();
        let program = program_map(&mut pages, &d, nvme);
        assert_eq!(program.load_u32(INTMS), 0);
        // Changed from elsewhere (another program's page, a kernel driver's store).
        d.engine
            .store_to_bar(nvme, 0, INTMS, &2u32.to_le_bytes())
            .expect("stored");
        std::thread::sleep(REFRESH * 2);
        assert!(!pages.poll(&d.engine), "no store in the page");
        assert_eq!(program.load_u32(INTMS), 2);
    }

    #[test]
    fn a_page_nobody_maps_is_not_watched_and_shows_the_registers_anew_when_mapped_again() {
        let (d, nvme) = daemon_and_nvme("users");
        let mut pages = RegisterPages::default();
        let first = program_map(&mut pages, &d, nvme);
        let second = program_map(&mut pages, &d, nvme);
        pages.close(nvme, 0);
        assert!(pages.watched(), "one map is left");
        pages.close(nvme, 0);
        assert!(!pages.watched(), "nobody maps it");
        // A store while nobody maps the page is not delivered ...
        first.write(INTMS, &8u32.to_le_bytes());
        assert!(!pages.poll(&d.engine));
        assert_eq!(device_reads(&d, nvme, INTMS), 0);
        // ... and the next map shows the register as the device has it.
        drop(first);
        let third = program_map(&mut pages, &d, nvme);
        assert_eq!(third.load_u32(INTMS), 0);
        assert_eq!(second.load_u32(VS), NVME_1_4);
        assert!(pages.watched());
    }
}
