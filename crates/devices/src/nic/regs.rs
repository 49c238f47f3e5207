//! One function of the NIC as software reaches it: its BAR0 registers (global, per queue
//! pair, the MSI-X table and pending-bit array), its MAC address, queue pairs, counters and
//! configuration space. A physical and a virtual function look the same here; the NIC
//! ([`super::Nic`]) owns them and their DMA ports.

use super::port::EthPort;
use super::queues::QueuePair;
use super::spec::{self, queue, reg, LINK_SPEED_SHIFT, LINK_UP, MSIX_PBA, MSIX_TABLE, NIC_MAGIC};
use crate::config::{FunctionSpace, MsixLayout};
use crate::ethernet::MacAddr;
use crate::msix::MsixTable;
use smartio_platform::pci::msix;
use smartio_platform::{BarHandler, CompleterError, Notify};
use std::cell::Cell;
use std::rc::Rc;

const MSIX_TABLE_SIZE: u64 = spec::QUEUE_PAIRS as u64 * msix::ENTRY_SIZE;

/// What a function counts (its `RX_NO_BUFFER`, `TX_FRAMES`, `RX_FRAMES` registers).
#[derive(Debug, Default)]
pub struct FunctionCounters {
    pub(crate) tx_frames: Cell<u64>,
    pub(crate) rx_frames: Cell<u64>,
    pub(crate) rx_no_buffer: Cell<u64>,
}

impl FunctionCounters {
    pub(crate) fn bump(c: &Cell<u64>) {
        c.set(c.get() + 1);
    }
}

/// One function of the NIC: a physical function, or (later) a virtual one.
#[derive(Debug)]
pub struct NicFunction {
    pub(crate) mac: MacAddr,
    pub(crate) pci: FunctionSpace,
    pub(crate) msix: MsixTable,
    pub(crate) queues: Vec<QueuePair>,
    pub(crate) port: Rc<EthPort>,
    pub(crate) counters: FunctionCounters,
    /// The MSI-X table was written (a vector may have been unmasked).
    pub(crate) msix_written: Notify,
}

/// Where a BAR0 offset lands.
enum Bar0 {
    Global(u64),
    Queue(u16, u64),
    MsixTable(u64),
    MsixPba(u64),
}

fn decode(offset: u64) -> Option<Bar0> {
    if (MSIX_TABLE..MSIX_TABLE + MSIX_TABLE_SIZE).contains(&offset) {
        return Some(Bar0::MsixTable(offset - MSIX_TABLE));
    }
    if (MSIX_PBA..MSIX_PBA + 8).contains(&offset) {
        return Some(Bar0::MsixPba(offset - MSIX_PBA));
    }
    if offset < reg::END {
        return Some(Bar0::Global(offset));
    }
    let rel = offset.checked_sub(queue::FIRST)?;
    let q = u16::try_from(rel / queue::STRIDE).ok()?;
    let r = rel % queue::STRIDE;
    (q < spec::QUEUE_PAIRS && r < queue::END).then_some(Bar0::Queue(q, r))
}

impl NicFunction {
    /// A function with address `mac` on `port`, its settings in configuration space `pci`
    /// (built with [`NicFunction::msix_layout`]).
    pub fn new(mac: MacAddr, pci: FunctionSpace, port: Rc<EthPort>) -> Self {
        Self {
            mac,
            pci,
            msix: MsixTable::new(spec::QUEUE_PAIRS),
            queues: (0..spec::QUEUE_PAIRS)
                .map(|_| QueuePair::default())
                .collect(),
            port,
            counters: FunctionCounters::default(),
            msix_written: Notify::new(),
        }
    }

    /// Where the MSI-X table lives: BAR0, one vector per queue pair.
    pub fn msix_layout() -> MsixLayout {
        MsixLayout {
            vectors: spec::QUEUE_PAIRS,
            table_bar: spec::REGISTER_BAR,
            table_offset: MSIX_TABLE as u32,
            pba_bar: spec::REGISTER_BAR,
            pba_offset: MSIX_PBA as u32,
        }
    }

    /// The function's address.
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// Frames dropped for want of a posted receive buffer.
    pub fn rx_no_buffer(&self) -> u64 {
        self.counters.rx_no_buffer.get()
    }

    /// Frames received into posted buffers.
    pub fn rx_frames(&self) -> u64 {
        self.counters.rx_frames.get()
    }

    /// Frames sent.
    pub fn tx_frames(&self) -> u64 {
        self.counters.tx_frames.get()
    }

    /// Queue pair `q`.
    pub fn queue(&self, q: u16) -> Option<&QueuePair> {
        self.queues.get(usize::from(q))
    }

    fn global(&self, offset: u64) -> Result<u64, CompleterError> {
        let wire = self.port.counters();
        Ok(match offset {
            reg::ID => NIC_MAGIC,
            reg::MAC => self.mac.to_u64(),
            reg::MTU => self.port.mtu() as u64,
            reg::LINK => {
                let mbps = (self.port.rate_bps() / 1e6).round() as u64;
                let up = if self.port.link_up() { LINK_UP } else { 0 };
                (mbps << LINK_SPEED_SHIFT) | up
            }
            reg::QUEUE_PAIRS => u64::from(spec::QUEUE_PAIRS),
            reg::RX_NO_BUFFER => self.rx_no_buffer(),
            reg::TX_FRAMES => self.tx_frames(),
            reg::RX_FRAMES => self.rx_frames(),
            reg::WIRE_TX_FRAMES => wire.wire_tx,
            reg::WIRE_RX_FRAMES => wire.wire_rx,
            _ => return Err(CompleterError::OutOfRange),
        })
    }
}

impl BarHandler for NicFunction {
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        if bar != spec::REGISTER_BAR {
            return Err(CompleterError::OutOfRange);
        }
        let at = decode(offset).ok_or(CompleterError::OutOfRange)?;
        let value = match at {
            Bar0::MsixTable(o) => return self.msix.read_table(o, buf),
            Bar0::MsixPba(o) => return self.msix.read_pba(o, buf),
            _ if buf.len() != 8 || !offset.is_multiple_of(8) => {
                return Err(CompleterError::BadWidth(buf.len()))
            }
            Bar0::Global(o) => self.global(o)?,
            Bar0::Queue(q, r) => self.queue(q).ok_or(CompleterError::OutOfRange)?.read(r)?,
        };
        buf.copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        if bar != spec::REGISTER_BAR {
            return Err(CompleterError::OutOfRange);
        }
        let at = decode(offset).ok_or(CompleterError::OutOfRange)?;
        match at {
            Bar0::MsixTable(o) => {
                if self.msix.write_table(o, data)? {
                    self.msix_written.notify();
                }
                Ok(())
            }
            Bar0::MsixPba(_) | Bar0::Global(_) => Err(CompleterError::ReadOnly),
            _ if data.len() != 8 || !offset.is_multiple_of(8) => {
                Err(CompleterError::BadWidth(data.len()))
            }
            Bar0::Queue(q, r) => {
                let mut b = [0u8; 8];
                b.copy_from_slice(data);
                self.queue(q)
                    .ok_or(CompleterError::OutOfRange)?
                    .write(r, u64::from_le_bytes(b))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::layout_for;

    pub(crate) fn function() -> NicFunction {
        let layout = layout_for("nic", &toml::Table::new()).expect("default layout");
        let bars = crate::testing::assigned_bars(&layout, |_| 1 << 40);
        let pci = Rc::new(crate::config::ConfigSpace::new(
            &layout,
            &bars,
            Some(NicFunction::msix_layout()),
        ));
        let mac = MacAddr([2, 0, 0, 0, 0, 7]);
        NicFunction::new(
            mac,
            FunctionSpace::Own(pci),
            Rc::new(EthPort::new(100e9, 9000)),
        )
    }

    fn read(f: &NicFunction, offset: u64) -> Result<u64, CompleterError> {
        let mut b = [0u8; 8];
        f.mmio_read(0, offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    #[test]
    fn identification_mac_mtu_and_link_read_back() {
        let f = function();
        assert_eq!(read(&f, reg::ID), Ok(NIC_MAGIC));
        assert_eq!(read(&f, reg::MAC), Ok(0x0200_0000_0007));
        assert_eq!(read(&f, reg::MTU), Ok(9000));
        assert_eq!(
            read(&f, reg::LINK),
            Ok(100_000 << LINK_SPEED_SHIFT),
            "no partner"
        );
        assert_eq!(read(&f, reg::QUEUE_PAIRS), Ok(8));
        assert_eq!(
            f.mmio_write(0, reg::MAC, &[0; 8]),
            Err(CompleterError::ReadOnly)
        );
    }

    #[test]
    fn queue_registers_are_per_queue_pair_and_bounded() {
        let f = function();
        f.mmio_write(0, queue::base(3) + queue::RX_BASE, &0x4000u64.to_le_bytes())
            .expect("writable");
        assert_eq!(read(&f, queue::base(3) + queue::RX_BASE), Ok(0x4000));
        assert_eq!(read(&f, queue::base(2) + queue::RX_BASE), Ok(0));
        assert_eq!(
            read(&f, queue::base(spec::QUEUE_PAIRS)),
            Err(CompleterError::OutOfRange)
        );
        assert_eq!(
            read(&f, queue::base(0) + queue::END),
            Err(CompleterError::OutOfRange)
        );
        let mut narrow = [0u8; 4];
        assert_eq!(
            f.mmio_read(0, queue::base(0), &mut narrow),
            Err(CompleterError::BadWidth(4))
        );
    }

    #[test]
    fn bar0_ends_where_each_region_ends_and_queue_registers_take_aligned_quadwords() {
        let f = function();
        assert_eq!(f.mac(), MacAddr([2, 0, 0, 0, 0, 7]));
        let mut dword = [0u8; 4];
        // The last vector's control dword is the table's; the dword after it is nothing.
        let last = MSIX_TABLE + MSIX_TABLE_SIZE - 4;
        f.mmio_read(0, last, &mut dword)
            .expect("the table's last dword");
        assert_eq!(u32::from_le_bytes(dword), msix::VECTOR_MASKED);
        assert_eq!(
            f.mmio_read(0, MSIX_TABLE + MSIX_TABLE_SIZE, &mut dword),
            Err(CompleterError::OutOfRange)
        );
        // The pending bits: nothing pending, and nothing past them.
        let mut quad = [0xffu8; 8];
        f.mmio_read(0, MSIX_PBA, &mut quad).expect("the PBA");
        assert_eq!(quad, [0; 8]);
        assert_eq!(
            f.mmio_read(0, MSIX_PBA + 8, &mut quad),
            Err(CompleterError::OutOfRange)
        );
        // Past the global registers is nothing, not a read-only register.
        assert_eq!(
            f.mmio_write(0, reg::END, &[0; 8]),
            Err(CompleterError::OutOfRange)
        );
        // A queue register takes an aligned quadword only.
        let tx_base = queue::base(1) + queue::TX_BASE;
        assert_eq!(
            f.mmio_write(0, tx_base, &[0; 4]),
            Err(CompleterError::BadWidth(4))
        );
        assert_eq!(
            f.mmio_write(0, tx_base + 4, &[0; 8]),
            Err(CompleterError::BadWidth(8))
        );
        assert_eq!(read(&f, tx_base), Ok(0), "nothing was written");
    }

    #[test]
    fn the_msix_table_takes_dwords_and_unmasking_wakes_the_function() {
        let f = function();
        let control = MSIX_TABLE + msix::ENTRY_SIZE + 12;
        let mut dword = [0u8; 4];
        f.mmio_read(0, control, &mut dword).expect("table");
        assert_eq!(u32::from_le_bytes(dword), msix::VECTOR_MASKED);
        f.mmio_write(0, control, &0u32.to_le_bytes())
            .expect("unmask");
        assert_eq!(
            f.mmio_write(0, MSIX_PBA, &[0; 8]),
            Err(CompleterError::ReadOnly)
        );
    }
}
