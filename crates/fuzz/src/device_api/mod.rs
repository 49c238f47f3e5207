//! The `device_api` target: a bounded sequence of SmartIO device-API and SISCI calls on the
//! shipped `cluster-switch` scenario (three hosts, one cluster switch), with handles that are
//! live, stale (returned, removed) or forged.
//!
//! Checked: nothing panics; a call with a handle that is not live, or a host the cluster does
//! not have, fails; every error says something; data stored through a remote map loads back
//! equal; and after everything made is torn down in order (each step succeeding), every NTB
//! adapter's look-up table and requester-id table and every IOMMU domain is as it was before
//! the first call.

pub mod ops;

use crate::Outcome;
use ops::{Call, HostPick, Pick};
use smartio_calibration::Calibration;
use smartio_cluster::{load_fabric, Cluster, ClusterOptions};
use smartio_fabric::{ClusterNodeId, Fabric, GroupId, HostId, LutTarget};
use smartio_host::HostOs;
use smartio_machine::Machine;
use smartio_platform::{PhysAddr, SimTime};
use smartio_smartio::sisci::{LocalMap, LocalSegment, RemoteMap, RemoteSegment, SciError, Sisci};
use smartio_smartio::{
    BorrowOptions, CpuMap, DeviceBorrow, Fdid, Hints, PeerRequester, Segment, SegmentLocation,
    SmartIo,
};
use smartio_workloads::Booted;
use std::cell::RefCell;
use std::fmt::Display;
use std::rc::Rc;

/// The scenario the calls run on.
const SCENARIO: &str = "cluster-switch";
/// Largest map the fuzzer asks for (see the SISCI map call).
const FABRIC_MAP_LIMIT: u64 = 1 << 40;
/// Virtual time the calls may take.
const DEADLINE: SimTime = SimTime(10_000_000_000_000); // 10 s

/// The shipped scenario, enumerated once per thread.
fn fabric() -> Fabric {
    crate::cached_fabric(SCENARIO, || {
        load_fabric(SCENARIO).map_err(|e| e.to_string())
    })
}

/// Every table SmartIO touches ([`smartio_fabric::Fabric::tables_in_use`]).
pub fn tables(machine: &Machine) -> (Vec<(usize, usize)>, Vec<Vec<usize>>) {
    machine.fabric().tables_in_use()
}

/// A handle made by a call, and whether it is still live.
#[derive(Debug)]
struct Made<T> {
    all: Vec<(T, bool)>,
}

impl<T> Default for Made<T> {
    fn default() -> Self {
        Made { all: Vec::new() }
    }
}

impl<T: Clone> Made<T> {
    fn add(&mut self, t: T) {
        self.all.push((t, true));
    }
    /// The handle `i` picks (modulo), and whether it is live.
    fn get(&self, i: u8) -> Option<(usize, T, bool)> {
        let n = self.all.len();
        (n > 0).then(|| {
            let k = usize::from(i) % n;
            (k, self.all[k].0.clone(), self.all[k].1)
        })
    }
    fn retire(&mut self, k: usize) {
        if let Some(e) = self.all.get_mut(k) {
            e.1 = false;
        }
    }
    fn live(&self) -> Vec<T> {
        self.all
            .iter()
            .filter(|e| e.1)
            .map(|e| e.0.clone())
            .collect()
    }
}

/// Everything the calls made.
#[derive(Debug, Default)]
struct World {
    borrows: Made<DeviceBorrow>,
    segments: Made<Segment>,
    cpu_maps: Made<CpuMap>,
    peers: Made<PeerRequester>,
    device_maps: Vec<(DeviceBorrow, Segment)>,
    lent: Vec<(HostId, Fdid)>,
    sci_segments: Made<LocalSegment>,
    connections: Made<RemoteSegment>,
    maps: Made<RemoteMap>,
    local_maps: Made<LocalMap>,
    groups: Made<GroupId>,
    members: Vec<(LocalSegment, u32, GroupId)>,
    errors: u32,
    oks: u32,
    /// Which calls succeeded and which errors they failed with.
    seen: std::collections::BTreeSet<String>,
    /// Bytes of segments asked for so far (see [`RAM_BUDGET`]).
    asked: u64,
}

/// Segment bytes one input may ask for. A host kernel zeroes the memory it hands out by
/// writing every byte, so each allocation costs the fuzzing machine its size (reported to
/// the host model's owner); sizes beyond every host's RAM are still asked for, as they fail
/// before anything is written.
const RAM_BUDGET: u64 = 256 << 20;

impl World {
    /// Whether a segment of `size` bytes fits the input's budget (and counts it if so).
    fn budget(&mut self, size: u64) -> bool {
        if size >= 1 << 40 {
            return true;
        }
        match self.asked.checked_add(size) {
            Some(total) if total <= RAM_BUDGET => {
                self.asked = total;
                true
            }
            _ => false,
        }
    }
}

/// The rig: cluster, kernels, SmartIO and SISCI.
struct Rig {
    machine: Machine,
    hosts: Vec<HostOs>,
    smartio: SmartIo,
    sci: Sisci,
    fdids: Vec<Fdid>,
}

/// Runs the calls `data` decodes to, tears everything down and checks the tables.
pub fn device_api(data: &[u8]) -> Outcome {
    let calls = ops::decode(data);
    let count = calls.len();
    let calibration = Calibration::default_embedded();
    let cluster = match Cluster::from_fabric(fabric(), &calibration, &ClusterOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("{SCENARIO} does not build: {e}"),
    };
    let _guard = crate::MachineGuard(cluster.machine.clone());
    let Booted {
        hosts,
        smartio,
        fdids,
    } = match Booted::boot(&cluster) {
        Ok(b) => b,
        Err(e) => panic!("{SCENARIO} does not boot with SmartIO: {e}"),
    };
    let sci = smartio.sisci().clone();
    let before = tables(&cluster.machine);
    let ram_before: Vec<u64> = hosts.iter().map(HostOs::ram_in_use).collect();
    let rig = Rc::new(Rig {
        machine: cluster.machine.clone(),
        hosts,
        smartio,
        sci,
        fdids,
    });
    let result: Rc<RefCell<Option<(u32, u32, String)>>> = Rc::default();
    let (r, out) = (rig.clone(), result.clone());
    cluster.machine.spawn(async move {
        let mut w = World::default();
        for call in calls {
            r.call(&mut w, call).await;
        }
        r.teardown(&w).await;
        let seen: Vec<&str> = w.seen.iter().map(String::as_str).collect();
        *out.borrow_mut() = Some((w.oks, w.errors, seen.join(" ")));
    });
    cluster.machine.run_until(DEADLINE);
    let Some((oks, errors, seen)) = result.borrow_mut().take() else {
        panic!("the {count} calls and the teardown did not finish");
    };
    let ram_after: Vec<u64> = rig.hosts.iter().map(HostOs::ram_in_use).collect();
    assert_eq!(
        ram_before, ram_after,
        "after tearing everything down the hosts' RAM in use differs (bytes per host)"
    );
    let after = tables(&cluster.machine);
    assert_eq!(
        before, after,
        "after tearing everything down the NTB and IOMMU tables differ (adapters: (LUT entries, requester ids); hosts: IOMMU pages per domain)"
    );
    Outcome::accepted(format!("{count} calls: {oks} ok, {errors} errors; {seen}"))
}

/// Records a call's result: an error must say something; a call that had to fail must not
/// succeed.
fn note<T, E: Display + std::fmt::Debug>(
    w: &mut World,
    what: &str,
    must_fail: bool,
    r: &Result<T, E>,
) -> bool {
    match r {
        Ok(_) => {
            assert!(
                !must_fail,
                "{what}: succeeded with a handle that is not live or a host that does not exist"
            );
            w.oks += 1;
            w.seen.insert(format!("{what}:ok"));
            true
        }
        Err(e) => {
            assert!(!e.to_string().trim().is_empty(), "{what}: an empty error");
            w.errors += 1;
            let debug = format!("{e:?}");
            let variant = debug
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or_default();
            w.seen.insert(format!("{what}:{variant}"));
            false
        }
    }
}

impl Rig {
    /// The name of device `index` (modulo the devices, one past them a name no device has)
    /// of host `h`'s tree; a host that does not exist gets `nvme0`.
    fn device_name(&self, h: HostId, index: u8) -> String {
        match self.hosts.get(h.0 as usize) {
            Some(os) => {
                let devices = os.devices();
                devices
                    .get(usize::from(index) % (devices.len() + 1))
                    .map_or_else(
                        || format!("no-such-device{index}"),
                        |d| d.name().to_string(),
                    )
            }
            None => "nvme0".to_string(),
        }
    }

    fn host(&self, h: HostPick) -> (HostId, bool) {
        (HostId(h.0), (h.0 as usize) < self.hosts.len())
    }

    fn fdid(&self, i: u32) -> Fdid {
        match self.fdids.get(i as usize % (self.fdids.len() + 1)) {
            Some(&f) => f,
            None => Fdid(1000 + i),
        }
    }

    /// A hold: made (live or not) or forged; valid when it equals a live one.
    fn borrow(&self, w: &World, p: Pick) -> Option<(Option<usize>, DeviceBorrow, bool)> {
        match p {
            Pick::Made(i) => w.borrows.get(i).map(|(k, b, live)| (Some(k), b, live)),
            Pick::Forged(a, b, c) => {
                let f = DeviceBorrow {
                    id: a,
                    fdid: Fdid(b % 16),
                    host: HostId(c % 4),
                };
                Some((None, f, w.borrows.live().contains(&f)))
            }
        }
    }

    fn segment(&self, w: &World, p: Pick) -> Option<(Option<usize>, Segment, bool)> {
        match p {
            Pick::Made(i) => w.segments.get(i).map(|(k, s, live)| (Some(k), s, live)),
            Pick::Forged(a, b, c) => {
                let s = Segment {
                    id: a,
                    size: u64::from(b),
                    location: if c & 1 == 0 {
                        SegmentLocation::Ram {
                            host: HostId(c % 4),
                            phys: PhysAddr(u64::from(b) << 12),
                        }
                    } else {
                        SegmentLocation::Device {
                            fdid: Fdid(c % 16),
                            bar: (c >> 8) as u8 % 8,
                            offset: u64::from(b),
                        }
                    },
                };
                Some((None, s, w.segments.live().contains(&s)))
            }
        }
    }

    fn sci_segment(&self, w: &World, p: Pick) -> Option<(Option<usize>, LocalSegment, bool)> {
        match p {
            // A segment id and its memory are reused once freed: a stale handle can equal
            // a live one, and then it is that live one.
            Pick::Made(i) => w.sci_segments.get(i).map(|(k, s, _)| {
                let live = w.sci_segments.live().contains(&s);
                (Some(k), s, live)
            }),
            Pick::Forged(a, b, c) => {
                let s = LocalSegment {
                    host: HostId(c % 4),
                    id: a % 8,
                    phys: PhysAddr(u64::from(b) << 16),
                    size: u64::from(c),
                };
                Some((None, s, w.sci_segments.live().contains(&s)))
            }
        }
    }

    fn connection(&self, w: &World, p: Pick) -> Option<(Option<usize>, RemoteSegment, bool)> {
        match p {
            Pick::Made(i) => w.connections.get(i).map(|(k, s, l)| (Some(k), s, l)),
            Pick::Forged(a, b, c) => {
                let adapters = self.machine.fabric().adapters().len() as u32 + 1;
                let s = RemoteSegment {
                    id: a % 64,
                    host: HostId(c % 4),
                    adapter: smartio_fabric::AdapterId(b % adapters),
                    target: LutTarget::Adapter(smartio_fabric::AdapterId(c % adapters)),
                    size: u64::from(b),
                };
                Some((None, s, w.connections.live().contains(&s)))
            }
        }
    }

    async fn call(&self, w: &mut World, call: Call) {
        let api = &self.smartio;
        match call {
            Call::Borrow {
                host,
                device,
                exclusive,
                via,
            } => {
                let (h, ok) = self.host(host);
                let r = api.borrow_device_via(h, self.fdid(device), exclusive, via);
                if note(w, "borrow_device", !ok, &r) {
                    if let Ok(b) = r {
                        w.borrows.add(b);
                    }
                }
            }
            Call::Downgrade(p) => {
                if let Some((_, b, live)) = self.borrow(w, p) {
                    let r = api.downgrade(&b);
                    note(w, "downgrade", !live, &r);
                }
            }
            Call::Return(p) => {
                if let Some((k, b, live)) = self.borrow(w, p) {
                    let r = api.return_device(b);
                    if note(w, "return_device", !live, &r) {
                        let k = k.or_else(|| w.borrows.all.iter().position(|e| e.0 == b && e.1));
                        if let Some(k) = k {
                            w.borrows.retire(k);
                        }
                        w.device_maps.retain(|(d, _)| *d != b);
                    }
                }
            }
            Call::BarSegment(p, bar) => {
                if let Some((_, b, live)) = self.borrow(w, p) {
                    let r = api.bar_segment(&b, bar);
                    if note(w, "bar_segment", !live, &r) {
                        if let Ok(s) = r {
                            w.segments.add(s);
                        }
                    }
                }
            }
            Call::CreateSegment(p, size, hints) => {
                if !w.budget(size) {
                    return;
                }
                if let Some((_, b, live)) = self.borrow(w, p) {
                    let hints = Hints {
                        device_reads: hints & 1 != 0,
                        device_writes: hints & 2 != 0,
                        host_reads: hints & 4 != 0,
                        host_writes: hints & 8 != 0,
                        multi_host: hints & 16 != 0,
                        peer_to_peer: hints & 32 != 0,
                    };
                    let r = api.create_segment(&b, size, hints);
                    if note(w, "create_segment", !live, &r) {
                        if let Ok(s) = r {
                            assert!(s.size >= size, "a segment of {size} bytes got {}", s.size);
                            w.segments.add(s);
                        }
                    }
                }
            }
            Call::RemoveSegment(p) => {
                if let Some((_, s, live)) = self.segment(w, p) {
                    let r = api.remove_segment(s);
                    if note(w, "remove_segment", !live, &r) {
                        if let Some(k) = w.segments.all.iter().position(|e| e.0 == s && e.1) {
                            w.segments.retire(k);
                        }
                    }
                }
            }
            Call::MapForDevice(pb, ps) => {
                if let (Some((_, b, bl)), Some((_, s, sl))) =
                    (self.borrow(w, pb), self.segment(w, ps))
                {
                    let r = api.map_for_device(&b, &s);
                    if note(w, "map_for_device", !(bl && sl), &r)
                        && !w.device_maps.contains(&(b, s))
                    {
                        w.device_maps.push((b, s));
                    }
                }
            }
            Call::UnmapDevice(pb, ps) => {
                if let (Some((_, b, bl)), Some((_, s, _))) =
                    (self.borrow(w, pb), self.segment(w, ps))
                {
                    let r = api.unmap_device(&b, &s);
                    if note(w, "unmap_device", !bl, &r) {
                        w.device_maps.retain(|m| *m != (b, s));
                    }
                }
            }
            Call::MapForCpu(host, ps, via) => {
                let (h, ok) = self.host(host);
                if let Some((_, s, live)) = self.segment(w, ps) {
                    let r = api.map_for_cpu_via(h, &s, via);
                    if note(w, "map_for_cpu", !(ok && live), &r) {
                        if let Ok(m) = r {
                            w.cpu_maps.add(m);
                        }
                    }
                }
            }
            Call::UnmapCpu(p) => {
                let m = match p {
                    Pick::Made(i) => w.cpu_maps.get(i),
                    Pick::Forged(a, b, c) => {
                        let m = CpuMap {
                            id: a,
                            host: HostId(c % 4),
                            addr: smartio_platform::BusAddr(u64::from(b)),
                            size: u64::from(c),
                        };
                        let live = w.cpu_maps.live().contains(&m);
                        let k = w.cpu_maps.all.iter().position(|e| e.0 == m);
                        Some((k.unwrap_or(usize::MAX), m, live))
                    }
                };
                if let Some((k, m, live)) = m {
                    let r = api.unmap_cpu(m);
                    if note(w, "unmap_cpu", !live, &r) {
                        w.cpu_maps.retire(k);
                    }
                }
            }
            Call::RegisterPeer(host, device) => {
                let (h, ok) = self.host(host);
                let name = self.device_name(h, device);
                let r = api.register_peer_requester(h, &name);
                if note(w, "register_peer_requester", !ok, &r) {
                    if let Ok(p) = r {
                        w.peers.add(p);
                    }
                }
            }
            Call::LocalDeviceSegment(host, device, bar, offset, size) => {
                let (h, ok) = self.host(host);
                let name = self.device_name(h, device);
                let r = api.local_device_segment(h, &name, bar, offset, size);
                if note(w, "local_device_segment", !ok, &r) {
                    if let Ok(seg) = r {
                        assert_eq!(
                            seg.size, size,
                            "a local device segment has the size asked for"
                        );
                        w.segments.add(seg);
                    }
                }
            }
            Call::UnregisterPeer(p) => {
                if let Some((k, r, live)) = match p {
                    Pick::Made(i) => w.peers.get(i),
                    Pick::Forged(a, _, c) => {
                        let r = PeerRequester {
                            id: a,
                            host: HostId(c % 4),
                            device: "nvme0".into(),
                        };
                        let live = w.peers.live().contains(&r);
                        Some((usize::MAX, r, live))
                    }
                } {
                    let res = api.unregister_peer_requester(r);
                    if note(w, "unregister_peer_requester", !live, &res) {
                        w.peers.retire(k);
                    }
                }
            }
            Call::Lend(host, device) => {
                let (h, ok) = self.host(host);
                let fdid = self.fdid(device);
                let r = api.borrow(h, fdid, &BorrowOptions::default()).await;
                if note(w, "borrow (Device Lending)", !ok, &r) {
                    w.lent.push((h, fdid));
                }
            }
            Call::GiveBack(host, device) => {
                let (h, ok) = self.host(host);
                let fdid = self.fdid(device);
                let r = api.give_back(h, fdid).await;
                if note(w, "give_back", !ok, &r) {
                    w.lent.retain(|l| *l != (h, fdid));
                }
            }
            _ => self.sci_call(w, call).await,
        }
    }

    async fn sci_call(&self, w: &mut World, call: Call) {
        let sci = &self.sci;
        match call {
            Call::SciCreate(host, id, size) => {
                if !w.budget(size) {
                    return;
                }
                let (h, ok) = self.host(host);
                let r = sci.create_segment(h, id, size);
                if note(w, "sisci create_segment", !ok, &r) {
                    if let Ok(s) = r {
                        w.sci_segments.add(s);
                    }
                }
            }
            Call::SciPrepare(p, adapter) => {
                if let Some((_, s, live)) = self.sci_segment(w, p) {
                    let r = sci.prepare_segment(&s, adapter);
                    note(w, "sisci prepare_segment", !live, &r);
                }
            }
            Call::SciAvailable(p, adapter, on) => {
                if let Some((_, s, live)) = self.sci_segment(w, p) {
                    let r = if on {
                        sci.set_available(&s, adapter)
                    } else {
                        sci.set_unavailable(&s, adapter)
                    };
                    note(w, "sisci set_available", !live, &r);
                }
            }
            Call::SciConnect(host, adapter, node, seg) => {
                let (h, ok) = self.host(host);
                let node_id = {
                    let f = self.machine.fabric();
                    f.adapters()
                        .get(node as usize)
                        .map_or(ClusterNodeId(node * 4 + 1), |a| a.node_id)
                };
                let segment_id = match seg {
                    Pick::Made(i) => w.sci_segments.get(i).map_or(0, |(_, s, _)| s.id),
                    Pick::Forged(a, ..) => a,
                };
                let r = sci.connect_segment(h, adapter, node_id, segment_id);
                if note(w, "sisci connect_segment", !ok, &r) {
                    if let Ok(c) = r {
                        w.connections.add(c);
                    }
                }
            }
            Call::SciMapRemote(p, offset, size) => {
                if let Some((_, c, live)) = self.connection(w, p) {
                    // Maps of more than 2^40 bytes are left out: the fabric's look-up-table
                    // arithmetic overflows on them (reported to the fabric's owner).
                    let size = size % FABRIC_MAP_LIMIT;
                    let r = sci.map_remote(&c, offset, size);
                    if note(w, "sisci map_remote", !live, &r) {
                        if let Ok(m) = r {
                            w.maps.add(m);
                        }
                    }
                }
            }
            Call::SciStoreLoad(p, offset, len) => {
                if let Some((_, m, live)) = w.maps.get(match p {
                    Pick::Made(i) => i,
                    Pick::Forged(a, ..) => a as u8,
                }) {
                    let offset = offset % m.size().max(1);
                    let data: Vec<u8> = (0..len).map(|i| (i as u8) ^ 0x5a).collect();
                    let r = m.store(offset, &data).await;
                    let stored = note(w, "remote store", !live, &r);
                    let multicast = matches!(m.remote().target, LutTarget::Multicast(_));
                    if stored && !multicast {
                        let mut back = vec![0u8; data.len()];
                        let r = m.load(offset, &mut back).await;
                        if note(w, "remote load", false, &r) {
                            assert_eq!(
                                back, data,
                                "a remote load differs from the store before it"
                            );
                        }
                    }
                }
            }
            Call::SciUnmap(p) => {
                let i = match p {
                    Pick::Made(i) => i,
                    Pick::Forged(a, ..) => a as u8,
                };
                if let Some((k, m, live)) = w.maps.get(i) {
                    let r = sci.unmap(&m);
                    if note(w, "sisci unmap", !live, &r) {
                        w.maps.retire(k);
                    }
                }
            }
            Call::SciDisconnect(p) => {
                if let Some((_, c, live)) = self.connection(w, p) {
                    let r = sci.disconnect_segment(&c);
                    if note(w, "sisci disconnect_segment", !live, &r) {
                        if let Some(k) = w.connections.all.iter().position(|e| e.0 == c && e.1) {
                            w.connections.retire(k);
                        }
                    }
                }
            }
            Call::SciRemove(p) => {
                if let Some((_, s, live)) = self.sci_segment(w, p) {
                    let r = sci.remove_segment(&s);
                    if note(w, "sisci remove_segment", !live, &r) {
                        if let Some(k) = w.sci_segments.all.iter().position(|e| e.0 == s && e.1) {
                            w.sci_segments.retire(k);
                        }
                    }
                }
            }
            Call::SciLocal(p, map) => {
                if map {
                    if let Some((_, s, live)) = self.sci_segment(w, p) {
                        let r = sci.map_local(&s);
                        if note(w, "sisci map_local", !live, &r) {
                            if let Ok(m) = r {
                                w.local_maps.add(m);
                            }
                        }
                    }
                } else if let Some((k, m, live)) = w.local_maps.get(match p {
                    Pick::Made(i) => i,
                    Pick::Forged(a, ..) => a as u8,
                }) {
                    let r = sci.unmap_local(&m);
                    if note(w, "sisci unmap_local", !live, &r) {
                        w.local_maps.retire(k);
                    }
                }
            }
            Call::GroupCreate(size) => {
                let r = sci.create_multicast_group(size);
                if note(w, "create_multicast_group", false, &r) {
                    if let Ok(g) = r {
                        w.groups.add(g);
                    }
                }
            }
            Call::GroupMember(ps, adapter, pg, join) => {
                let g = match pg {
                    Pick::Made(i) => w.groups.get(i).map_or(GroupId(0), |g| g.1),
                    Pick::Forged(a, ..) => GroupId(a % 8),
                };
                if let Some((_, s, live)) = self.sci_segment(w, ps) {
                    let r = if join {
                        sci.join_multicast(&s, adapter, g)
                    } else {
                        sci.leave_multicast(&s, adapter, g)
                    };
                    if note(w, "multicast join/leave", !live, &r) {
                        if join {
                            w.members.push((s, adapter, g));
                        } else {
                            w.members.retain(|m| *m != (s, adapter, g));
                        }
                    }
                }
            }
            Call::GroupConnect(host, adapter, pg) => {
                let (h, ok) = self.host(host);
                let g = match pg {
                    Pick::Made(i) => w.groups.get(i).map_or(GroupId(0), |g| g.1),
                    Pick::Forged(a, ..) => GroupId(a % 8),
                };
                let r = sci.connect_multicast(h, adapter, g);
                if note(w, "connect_multicast", !ok, &r) {
                    if let Ok(c) = r {
                        w.connections.add(c);
                    }
                }
            }
            Call::GroupRemove(pg) => {
                if let Some((k, g, _)) = match pg {
                    Pick::Made(i) => w.groups.get(i),
                    Pick::Forged(a, ..) => Some((usize::MAX, GroupId(a % 8), false)),
                } {
                    let r = sci.remove_multicast_group(g);
                    if note(w, "remove_multicast_group", false, &r) {
                        w.groups.retire(k);
                        if let Some(k) = w.groups.all.iter().position(|e| e.0 == g && e.1) {
                            w.groups.retire(k);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Undoes everything still live, in the order the API requires; every step must work.
    async fn teardown(&self, w: &World) {
        let (sci, api) = (&self.sci, &self.smartio);
        let must = |what: &str, r: Result<(), SciError>| {
            if let Err(e) = r {
                panic!("teardown: {what}: {e}");
            }
        };
        for m in w.maps.live() {
            must("unmap", sci.unmap(&m));
        }
        for m in w.local_maps.live() {
            must("unmap_local", sci.unmap_local(&m));
        }
        for (seg, adapter, g) in &w.members {
            must("leave_multicast", sci.leave_multicast(seg, *adapter, *g));
        }
        for c in w.connections.live() {
            must("disconnect", sci.disconnect_segment(&c));
        }
        for g in w.groups.live() {
            must("remove group", sci.remove_multicast_group(g));
        }
        for seg in w.sci_segments.live() {
            must("remove sisci segment", sci.remove_segment(&seg));
        }
        for m in w.cpu_maps.live() {
            must("unmap_cpu", api.unmap_cpu(m));
        }
        for (b, seg) in &w.device_maps {
            must("unmap_device", api.unmap_device(b, seg));
        }
        for seg in w.segments.live() {
            must("remove_segment", api.remove_segment(seg));
        }
        for p in w.peers.live() {
            must(
                "unregister_peer_requester",
                api.unregister_peer_requester(p),
            );
        }
        for b in w.borrows.live() {
            must("return_device", api.return_device(b));
        }
        for &(h, fdid) in &w.lent {
            must("give_back", api.give_back(h, fdid).await);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_calls_leave_the_tables_as_they_were() {
        let out = device_api(&[]);
        assert_eq!(out, Outcome::accepted("0 calls: 0 ok, 0 errors; "));
    }

    #[test]
    fn local_device_segments_are_made_over_a_hosts_own_bars_and_refused_elsewhere() {
        // `local_device_segment` on the lender (host 1) of device index 0..8, BAR 1, offset 0,
        // 64 bytes: the GPUs' apertures take it, devices without a BAR 1 refuse it.
        let details: Vec<String> = (0..8u8)
            .map(|d| device_api(&[27, 1, d, 1, 0, 5, 1, 0]).detail)
            .collect();
        assert!(
            details
                .iter()
                .any(|d| d.contains("local_device_segment:ok")),
            "{details:?}"
        );
        assert!(
            details
                .iter()
                .any(|d| d.contains("local_device_segment:LocalDevice")),
            "{details:?}"
        );
    }

    #[test]
    fn a_borrow_map_and_return_round_trip_restores_the_tables() {
        // Borrow (host 0, device 0, shared), create a segment (hints 0), map it for the device.
        let out = device_api(&[0, 0, 0, 0, 0, 5, 0, 2, 0x10, 0, 0, 8, 0, 0]);
        assert!(out.detail.contains("3 ok"), "{}", out.detail);
    }
}
