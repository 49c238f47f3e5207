//! Where a map lands: the fabric's route from a program's CPU to a map's address, walked
//! piece by piece (each look-up-table entry of an NTB window is one piece), must end in one
//! host's RAM or one BAR, contiguous — the memory file and offset a program is handed.

use crate::daemon::Daemon;
use crate::refusal::Refused;
use smartio_fabric::{Access, EndpointId, HostId, Requester, Target};
use smartio_platform::BusAddr;

/// Where a map lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Landing {
    /// A host's RAM.
    Ram { host: HostId, phys: u64 },
    /// A device's BAR.
    Bar {
        endpoint: EndpointId,
        bar: u8,
        offset: u64,
    },
}

impl Landing {
    /// The same place `by` bytes further on.
    fn advanced(self, by: u64) -> Landing {
        match self {
            Landing::Ram { host, phys } => Landing::Ram {
                host,
                phys: phys + by,
            },
            Landing::Bar {
                endpoint,
                bar,
                offset,
            } => Landing::Bar {
                endpoint,
                bar,
                offset: offset + by,
            },
        }
    }
}

impl Daemon {
    /// Where `size` bytes from the CPU address `addr` of `host` land: one host's RAM or one
    /// BAR, contiguous (a map of a segment).
    pub(crate) fn landing(
        &self,
        host: HostId,
        addr: BusAddr,
        size: u64,
    ) -> Result<Landing, Refused> {
        let fabric = self.cluster.machine.fabric();
        let mut first: Option<Landing> = None;
        let mut done = 0;
        while done < size {
            let route = fabric
                .route(
                    Requester::Cpu(host),
                    BusAddr(addr.get() + done),
                    size - done,
                    Access::Write,
                )
                .map_err(Refused::Unroutable)?;
            let here = match route.target {
                Target::Memory { host, addr } => Landing::Ram {
                    host,
                    phys: addr.get(),
                },
                Target::Bar {
                    endpoint,
                    bar,
                    offset,
                } => Landing::Bar {
                    endpoint,
                    bar,
                    offset,
                },
                _ => return Err(Refused::NeitherRamNorBar),
            };
            match first {
                None => first = Some(here),
                Some(start) if start.advanced(done) == here => {}
                Some(_) => return Err(Refused::NotContiguous),
            }
            done += route.len;
        }
        first.ok_or(Refused::EmptyMap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_calibration::Calibration;
    use smartio_fabric::{AdapterId, LutTarget, NtbMapping};

    /// Two hosts joined by NTB adapters whose 64 MiB windows have 64 entries of 1 MiB, so a
    /// map of a few MiB crosses entries; the lender has a DMA device (its memory in BAR2).
    const SMALL_WINDOWS: &str = r#"
name = "small-windows"
description = "borrower and lender joined by NTB adapters with 1 MiB look-up-table entries"

[[host]]
name = "borrower"
ram = "1 GiB"
iommu = false
cores = 1

[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "64 MiB"

[[host]]
name = "lender"
ram = "1 GiB"
iommu = false
cores = 1

[[host.device]]
name = "dma0"
kind = "dma"
parent = "root"
link = "gen3 x16"

[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "64 MiB"
connect = "borrower.ntb0"
cable = "gen3 x16"
"#;

    const MIB: u64 = 1 << 20;

    /// A daemon on the small-windows cluster, its files in a directory of test `name`'s.
    fn daemon(name: &str) -> Daemon {
        let dir = std::env::temp_dir().join(format!(
            "smartio-live-landing-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory");
        let scenario = dir.join("small-windows.toml");
        std::fs::write(&scenario, SMALL_WINDOWS).expect("written");
        Daemon::up(
            scenario.to_str().expect("utf-8"),
            &Calibration::default_embedded(),
            dir.join("cluster.sock").to_str().expect("utf-8"),
        )
        .expect("the daemon starts")
    }

    /// The borrower's adapter maps `len` bytes of the lender's bus addresses from `remote`.
    fn map(d: &Daemon, remote: u64, len: u64) -> NtbMapping {
        d.cluster
            .machine
            .with_fabric_mut(|f| {
                f.ntb_map(AdapterId(0), LutTarget::Adapter(AdapterId(1)), remote, len)
            })
            .expect("look-up-table entries free")
    }

    #[test]
    fn a_map_across_entries_of_consecutive_ram_lands_at_its_first_byte() {
        let d = daemon("ram");
        assert_eq!(
            d.cluster.machine.fabric().adapter(AdapterId(0)).entry_size,
            MIB
        );
        let m = map(&d, 16 * MIB, 3 * MIB);
        let lender = HostId(1);
        // From 4 KiB before the first entry's end to 4 KiB into the third: three pieces.
        let landed = d.landing(HostId(0), BusAddr(m.bus_addr + MIB - 4096), MIB + 8192);
        assert_eq!(
            landed.ok(),
            Some(Landing::Ram {
                host: lender,
                phys: 17 * MIB - 4096
            })
        );
        let whole = d.landing(HostId(0), BusAddr(m.bus_addr), 3 * MIB);
        assert_eq!(
            whole.ok(),
            Some(Landing::Ram {
                host: lender,
                phys: 16 * MIB
            })
        );
    }

    #[test]
    fn a_map_across_entries_of_one_bar_lands_at_its_offset_in_the_bar() {
        let d = daemon("bar");
        let (endpoint, bar) = {
            let f = d.cluster.machine.fabric();
            let (i, ep) = f
                .endpoints()
                .iter()
                .enumerate()
                .find(|(_, e)| e.name == "dma0")
                .expect("the lender's DMA device");
            let bar = *ep.bars.iter().max_by_key(|b| b.size).expect("BARs");
            (EndpointId(i as u32), bar)
        };
        assert!(bar.size >= 4 * MIB, "{bar:?}");
        let m = map(&d, bar.base.get() + MIB, 2 * MIB);
        let landed = d.landing(HostId(0), BusAddr(m.bus_addr + MIB - 4096), 8192);
        assert_eq!(
            landed.ok(),
            Some(Landing::Bar {
                endpoint,
                bar: bar.index,
                offset: 2 * MIB - 4096
            })
        );
    }

    #[test]
    fn a_map_across_entries_of_places_apart_is_refused_as_not_contiguous() {
        let d = daemon("apart");
        let first = map(&d, 32 * MIB, MIB);
        let second = map(&d, 48 * MIB, MIB);
        assert_eq!(
            second.bus_addr,
            first.bus_addr + MIB,
            "neighbouring entries"
        );
        let landed = d.landing(HostId(0), BusAddr(first.bus_addr + MIB - 4096), 8192);
        assert!(matches!(landed, Err(Refused::NotContiguous)), "{landed:?}");
        // Each piece alone lands.
        let alone = d.landing(HostId(0), BusAddr(second.bus_addr), 4096);
        assert_eq!(
            alone.ok(),
            Some(Landing::Ram {
                host: HostId(1),
                phys: 48 * MIB
            })
        );
    }
}
