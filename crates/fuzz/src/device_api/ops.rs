//! SmartIO device-API and SISCI calls, decoded from fuzzer bytes.
//!
//! Handles (holds, segments, maps, connections) are chosen by a byte: an index into the
//! handles made so far (returned or removed ones included — stale handles are valid input),
//! or, for a byte of 0xf0 and above, a handle forged from the input's next bytes.

use crate::input::Input;

/// At most this many calls per input.
pub const MAX_OPS: usize = 160;

/// A handle choice: `Made(i)` picks the i-th handle made (modulo their number), `Forged`
/// builds one from arbitrary fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// One made by an earlier call.
    Made(u8),
    /// Arbitrary fields.
    Forged(u32, u32, u32),
}

/// A host choice: one of the scenario's hosts, or an id no host has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPick(pub u32);

/// One call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `borrow_device_via`.
    Borrow {
        /// Borrowing host.
        host: HostPick,
        /// Index into the registered devices, or an unregistered fdid.
        device: u32,
        /// Exclusive hold.
        exclusive: bool,
        /// Pin to this adapter number.
        via: Option<u32>,
    },
    /// `downgrade`.
    Downgrade(Pick),
    /// `return_device`.
    Return(Pick),
    /// `bar_segment`.
    BarSegment(Pick, u8),
    /// `create_segment` with hint bits.
    CreateSegment(Pick, u64, u8),
    /// `remove_segment`.
    RemoveSegment(Pick),
    /// `map_for_device`.
    MapForDevice(Pick, Pick),
    /// `unmap_device`.
    UnmapDevice(Pick, Pick),
    /// `map_for_cpu_via`.
    MapForCpu(HostPick, Pick, Option<u32>),
    /// `unmap_cpu`.
    UnmapCpu(Pick),
    /// `register_peer_requester` of a device by index in the host's tree (or a bad name).
    RegisterPeer(HostPick, u8),
    /// `unregister_peer_requester`.
    UnregisterPeer(Pick),
    /// Device Lending `borrow` / `give_back` of a registered device.
    Lend(HostPick, u32),
    /// `give_back`.
    GiveBack(HostPick, u32),
    /// SISCI `create_segment`.
    SciCreate(HostPick, Option<u32>, u64),
    /// SISCI `prepare_segment`.
    SciPrepare(Pick, u32),
    /// SISCI `set_available` / `set_unavailable`.
    SciAvailable(Pick, u32, bool),
    /// SISCI `connect_segment` (node id by adapter index or arbitrary, segment id by index
    /// or arbitrary).
    SciConnect(HostPick, u32, u32, Pick),
    /// SISCI `map_remote`.
    SciMapRemote(Pick, u64, u64),
    /// A store then a load of `len` bytes through a remote map at `offset`.
    SciStoreLoad(Pick, u64, u16),
    /// SISCI `unmap`.
    SciUnmap(Pick),
    /// SISCI `disconnect_segment`.
    SciDisconnect(Pick),
    /// SISCI `remove_segment`.
    SciRemove(Pick),
    /// SISCI `map_local` / `unmap_local`.
    SciLocal(Pick, bool),
    /// SISCI multicast: create a group of `size`.
    GroupCreate(u64),
    /// Join (`true`) or leave a group with a segment through an adapter.
    GroupMember(Pick, u32, Pick, bool),
    /// Connect a host's adapter to a group for sending.
    GroupConnect(HostPick, u32, Pick),
    /// Remove a group.
    GroupRemove(Pick),
    /// `local_device_segment` over `size` bytes at `offset` of BAR `bar` of a device by
    /// index in the host's tree (or a bad name).
    LocalDeviceSegment(HostPick, u8, u8, u64, u64),
}

fn pick(i: &mut Input) -> Pick {
    let b = i.u8();
    if b >= 0xf0 {
        Pick::Forged(i.u32(), i.u32(), i.u32())
    } else {
        Pick::Made(b)
    }
}

fn host(i: &mut Input) -> HostPick {
    let b = i.u8();
    HostPick(if b >= 0xf8 { i.u32() } else { u32::from(b % 3) })
}

/// A size: zero, small, up to 64 MiB, or far beyond any host's RAM (2^40 and up). Sizes
/// between 64 MiB and the RAM size are left out: the host kernel zeroes what it hands out
/// by writing every byte, so they cost the fuzzing machine their size in memory.
fn size(i: &mut Input) -> u64 {
    const BIG: u64 = 64 << 20;
    match i.u8() % 8 {
        0 => 0,
        1 => i.u64() | (1 << 40),
        2 => u64::from(i.u32()) % BIG,
        3 => match i.u8() % 64 {
            s @ 0..=26 => 1 << s,
            s => 1 << s.max(40),
        },
        4 => u64::MAX - u64::from(i.u8()),
        _ => u64::from(i.u16()) * 64,
    }
}

fn adapter(i: &mut Input) -> u32 {
    let b = i.u8();
    if b >= 0xfc {
        i.u32()
    } else {
        u32::from(b % 2)
    }
}

fn maybe_adapter(i: &mut Input) -> Option<u32> {
    (i.u8() & 1 == 1).then(|| adapter(i))
}

/// Decodes up to [`MAX_OPS`] calls.
pub fn decode(data: &[u8]) -> Vec<Call> {
    let mut i = Input::new(data);
    let mut calls = Vec::new();
    while !i.is_empty() && calls.len() < MAX_OPS {
        calls.push(decode_one(&mut i));
    }
    calls
}

fn decode_one(i: &mut Input) -> Call {
    match i.u8() % 28 {
        0 | 1 => Call::Borrow {
            host: host(i),
            device: i.u8().into(),
            exclusive: i.bool(),
            via: maybe_adapter(i),
        },
        2 => Call::Downgrade(pick(i)),
        3 => Call::Return(pick(i)),
        4 => Call::BarSegment(pick(i), i.u8() % 8),
        5 | 6 => Call::CreateSegment(pick(i), size(i), i.u8()),
        7 => Call::RemoveSegment(pick(i)),
        8 | 9 => Call::MapForDevice(pick(i), pick(i)),
        10 => Call::UnmapDevice(pick(i), pick(i)),
        11 => Call::MapForCpu(host(i), pick(i), maybe_adapter(i)),
        12 => Call::UnmapCpu(pick(i)),
        13 => Call::RegisterPeer(host(i), i.u8()),
        14 => Call::UnregisterPeer(pick(i)),
        15 => Call::Lend(host(i), i.u8().into()),
        16 => Call::GiveBack(host(i), i.u8().into()),
        17 => Call::SciCreate(host(i), i.bool().then(|| u32::from(i.u8() % 4)), size(i)),
        18 => Call::SciPrepare(pick(i), adapter(i)),
        19 => Call::SciAvailable(pick(i), adapter(i), i.bool()),
        20 => Call::SciConnect(host(i), adapter(i), i.u32() % 8, pick(i)),
        21 => Call::SciMapRemote(pick(i), size(i), size(i)),
        22 => Call::SciStoreLoad(pick(i), size(i), i.u16() % 4096),
        23 => Call::SciUnmap(pick(i)),
        24 => Call::SciDisconnect(pick(i)),
        25 => Call::SciRemove(pick(i)),
        26 => match i.u8() % 5 {
            0 => Call::GroupCreate(size(i)),
            1 => Call::GroupMember(pick(i), adapter(i), pick(i), i.bool()),
            2 => Call::GroupConnect(host(i), adapter(i), pick(i)),
            3 => Call::GroupRemove(pick(i)),
            _ => Call::SciLocal(pick(i), i.bool()),
        },
        _ => Call::LocalDeviceSegment(host(i), i.u8(), i.u8() % 8, size(i), size(i)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_bounded_and_empty_input_makes_none() {
        assert!(decode(&[]).is_empty());
        assert_eq!(decode(&[2u8; 5000]).len(), MAX_OPS);
    }

    #[test]
    fn a_high_handle_byte_forges_a_handle() {
        assert_eq!(
            decode(&[3, 0xf0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]),
            [Call::Return(Pick::Forged(1, 2, 3))]
        );
        assert_eq!(decode(&[3, 7]), [Call::Return(Pick::Made(7))]);
    }
}
