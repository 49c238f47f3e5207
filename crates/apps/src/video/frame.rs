//! One video frame's bytes and what a GPU makes of them: the decoded full-HD 4:2:0 frame
//! (a deterministic pattern of its stream and frame number, so every byte can be checked),
//! the digest the feature kernel computes over what it finds in device memory, and the
//! feature vector it writes back.
//!
//! The feature kernel (one thread; the frame's extraction takes the whole GPU, as EIR's JCD
//! and Tamura kernels fill every SM):
//!
//! ```text
//!   t_entry = clock64()
//!   ticket = atomicAdd(lock.next, 1); wait until lock.serving == ticket   (kernels of one
//!   t0 = clock64()                                                          GPU take turns)
//!   load the frame from device memory; digest it
//!   sleep the profile's eir_frame_ns                    (the one calibrated figure)
//!   t1 = clock64()
//!   store the feature vector {magic, stream, frame, digest, bytes, t0, t1, t_entry}
//!   atomicAdd(lock.serving, 1)
//! ```
//!
//! The ticket lock is there because the GPU model runs launches of different channels
//! concurrently and charges no contention between them: without it two frames in flight on
//! one GPU would each get the whole GPU.

use smartio_devices::gpu::kernel::{
    FaultReason, KernelFault, KernelFn, KernelFuture, ThreadContext,
};
use smartio_devices::gpu::spec::GpuAddr;
use smartio_machine::Agent;
use smartio_platform::SimDuration;
use smartio_workloads::gpu::{get_addr, get_u64, put_addr};
use std::rc::Rc;

/// Width of a full-HD frame in pixels.
pub const WIDTH: u64 = 1920;
/// Height of a full-HD frame in pixels.
pub const HEIGHT: u64 = 1080;
/// Bytes of one decoded 4:2:0 frame: a luma byte per pixel and two chroma planes of a
/// quarter of that (1920 × 1080 × 3 / 2 = 3,110,400).
pub const FRAME_BYTES: u64 = WIDTH * HEIGHT * 3 / 2;
/// Bytes of the feature vector a kernel writes (eight 64-bit words).
pub const FEATURE_BYTES: u64 = 64;
/// Bytes of a GPU's ticket lock in device memory (`next`, then `serving`).
pub const LOCK_BYTES: u64 = 16;
/// The kernel's name in the GPU kernel library.
pub const KERNEL_NAME: &str = "smartio.video.features";
/// First word of every feature vector ("EIRFEATS").
pub const MAGIC: u64 = u64::from_le_bytes(*b"EIRFEATS");

/// Which frame: stream and frame number within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct FrameId {
    /// Stream, from 0.
    pub stream: u32,
    /// Frame of the stream, from 0 (captured at `frame / fps` seconds).
    pub frame: u32,
}

impl std::fmt::Display for FrameId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream {} frame {}", self.stream, self.frame)
    }
}

/// Bytes the CPU writes and a kernel reads at a time (a multiple of 8): a frame moves in
/// twelve pieces, so no frame-sized buffer is ever allocated.
pub const PIECE: usize = 256 << 10;

/// SplitMix64's finaliser: a good 64-bit mix, cheap enough for 388,800 words per frame.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `buf` with bytes `offset..offset + buf.len()` of frame `id`'s decoded bytes: word
/// `i` is a mix of the frame's seed and `i`, so frames differ from each other everywhere
/// and a moved byte shows. `offset` is a multiple of 8.
pub fn fill(id: FrameId, offset: u64, buf: &mut [u8]) {
    let seed = mix((u64::from(id.stream) << 32 | u64::from(id.frame)) ^ 0x5649_4445_4f00_0000);
    let first = offset / 8;
    for (i, chunk) in (first..).zip(buf.chunks_mut(8)) {
        let word = mix(seed.wrapping_add(i)).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// Frame `id`'s first `len` decoded bytes (see [`fill`]).
#[cfg(test)]
fn pattern(id: FrameId, len: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len as usize];
    fill(id, 0, &mut bytes);
    bytes
}

/// A 64-bit digest over bytes given in pieces (every byte counts, and its position: a
/// multiply-rotate over little-endian words in four interleaved lanes — word `i` goes to
/// lane `i % 4`, so the lanes' multiplies overlap — the lanes and the length mixed in last).
/// The pieces may be of any length; the digest is that of their concatenation.
#[derive(Debug, Clone, Default)]
pub struct Digest {
    lanes: [u64; 4],
    /// Whole words taken so far.
    words: u64,
    len: u64,
    /// Bytes of an unfinished word.
    pending: [u8; 8],
    npending: usize,
}

const DIGEST_PRIME: u64 = 0x0000_0100_0000_01b3;

fn step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(DIGEST_PRIME).rotate_left(29)
}

fn le(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

impl Digest {
    /// An empty digest.
    pub fn new() -> Digest {
        Digest {
            lanes: [
                0x9e37_79b9_7f4a_7c15,
                0xc2b2_ae3d_27d4_eb4f,
                0x1656_67b1_9e37_79f9,
                0x27d4_eb2f_1656_67c5,
            ],
            ..Digest::default()
        }
    }

    fn word(&mut self, w: u64) {
        let lane = (self.words % 4) as usize;
        self.lanes[lane] = step(self.lanes[lane], w);
        self.words += 1;
    }

    /// Adds `bytes`.
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.npending > 0 {
            let n = (8 - self.npending).min(bytes.len());
            self.pending[self.npending..self.npending + n].copy_from_slice(&bytes[..n]);
            self.npending += n;
            bytes = &bytes[n..];
            if self.npending < 8 {
                return;
            }
            self.word(u64::from_le_bytes(self.pending));
            self.npending = 0;
        }
        // Until lane 0 is next, a word at a time; then four at a time.
        while !self.words.is_multiple_of(4) && bytes.len() >= 8 {
            self.word(le(&bytes[..8]));
            bytes = &bytes[8..];
        }
        let mut quads = bytes.chunks_exact(32);
        for q in &mut quads {
            for (lane, w) in self.lanes.iter_mut().zip(q.chunks_exact(8)) {
                *lane = step(*lane, le(w));
            }
            self.words += 4;
        }
        let mut words = quads.remainder().chunks_exact(8);
        for w in &mut words {
            self.word(le(w));
        }
        let rest = words.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.npending = rest.len();
    }

    /// The digest.
    pub fn finish(self) -> u64 {
        let tail = le(&self.pending[..self.npending]);
        let h = self.lanes.iter().fold(mix(tail), |h, &lane| {
            mix(h ^ lane).wrapping_mul(DIGEST_PRIME)
        });
        mix(h ^ self.len)
    }
}

/// The [`Digest`] of `bytes`.
#[cfg(test)]
fn digest(bytes: &[u8]) -> u64 {
    let mut d = Digest::new();
    d.update(bytes);
    d.finish()
}

/// What one launch of the feature kernel is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelParams {
    /// The frame in device memory.
    pub frame: GpuAddr,
    /// Its bytes.
    pub len: u64,
    /// Where the feature vector goes (device memory).
    pub features: GpuAddr,
    /// The GPU's ticket lock (device-memory offset).
    pub lock: u64,
    /// The profile's compute time for one frame, in nanoseconds.
    pub compute_ns: u64,
    /// Which frame it is (echoed into the features).
    pub id: FrameId,
}

impl KernelParams {
    /// The launch's parameter bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(80);
        put_addr(&mut p, self.frame);
        p.extend_from_slice(&self.len.to_le_bytes());
        put_addr(&mut p, self.features);
        for w in [
            self.lock,
            self.compute_ns,
            u64::from(self.id.stream),
            u64::from(self.id.frame),
        ] {
            p.extend_from_slice(&w.to_le_bytes());
        }
        p
    }

    /// The parameters back from their bytes, or `None` if they are not all there.
    pub fn decode(p: &[u8]) -> Option<KernelParams> {
        Some(KernelParams {
            frame: get_addr(p, 0)?,
            len: get_u64(p, 16)?,
            features: get_addr(p, 24)?,
            lock: get_u64(p, 40)?,
            compute_ns: get_u64(p, 48)?,
            id: FrameId {
                stream: u32::try_from(get_u64(p, 56)?).ok()?,
                frame: u32::try_from(get_u64(p, 64)?).ok()?,
            },
        })
    }
}

/// The feature vector as the CPU reads it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// [`MAGIC`] when a kernel wrote it.
    pub magic: u64,
    /// The frame the kernel was told it had.
    pub id: FrameId,
    /// The digest of the bytes the kernel found in device memory.
    pub digest: u64,
    /// How many bytes it digested.
    pub len: u64,
    /// The GPU's cycle counter when the kernel started (before its turn).
    pub entry_cycles: u64,
    /// The cycle counter when the kernel had the GPU (its turn came).
    pub start_cycles: u64,
    /// The cycle counter when it was done.
    pub end_cycles: u64,
}

impl Features {
    /// Reads a feature vector ([`FEATURE_BYTES`] bytes); `None` if it is short.
    pub fn decode(bytes: &[u8]) -> Option<Features> {
        let stream = u32::try_from(get_u64(bytes, 8)?).ok()?;
        let frame = u32::try_from(get_u64(bytes, 16)?).ok()?;
        Some(Features {
            magic: get_u64(bytes, 0)?,
            id: FrameId { stream, frame },
            digest: get_u64(bytes, 24)?,
            len: get_u64(bytes, 32)?,
            start_cycles: get_u64(bytes, 40)?,
            end_cycles: get_u64(bytes, 48)?,
            entry_cycles: get_u64(bytes, 56)?,
        })
    }

    fn encode(&self) -> [u8; FEATURE_BYTES as usize] {
        let mut out = [0u8; FEATURE_BYTES as usize];
        let words = [
            self.magic,
            u64::from(self.id.stream),
            u64::from(self.id.frame),
            self.digest,
            self.len,
            self.start_cycles,
            self.end_cycles,
            self.entry_cycles,
        ];
        for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// Why these features are not those of frame `id` with digest `want` over `len` bytes,
    /// or `None` if they are.
    pub fn mismatch(&self, id: FrameId, want: u64, len: u64) -> Option<String> {
        if self.magic != MAGIC {
            return Some(format!(
                "no feature vector came back (first word {:#018x})",
                self.magic
            ));
        }
        if self.id != id || self.len != len {
            return Some(format!(
                "the features are of {} ({} bytes), not of {id} ({len} bytes)",
                self.id, self.len
            ));
        }
        (self.digest != want).then(|| {
            format!(
                "the GPU's digest {:#018x} differs from the decoded frame's {want:#018x}",
                self.digest
            )
        })
    }
}

/// A fault for parameters that do not decode (the launch is the workload's own, so this is
/// a bug of the workload).
fn bad_params(t: &ThreadContext<Agent>) -> KernelFault {
    KernelFault {
        address: GpuAddr::Device(u64::MAX),
        reason: FaultReason::OutsideMemory {
            memory: t.memory_size(),
        },
    }
}

/// The feature kernel (see the module docs); launch it with one thread.
pub fn feature_kernel() -> KernelFn<Agent> {
    Rc::new(|t: ThreadContext<Agent>| -> KernelFuture {
        Box::pin(async move {
            let Some(p) = KernelParams::decode(t.params()) else {
                return Err(bad_params(&t));
            };
            let len = usize::try_from(p.len).map_err(|_| bad_params(&t))?;
            let entry_cycles = t.clock64().await;
            let ticket = t.atomic_add_u64(p.lock, 1).await?;
            t.wait_until(p.lock + 8, |serving| serving == ticket)
                .await?;
            // The turn is handed on however the work ends: a fault here must not leave the
            // GPU's other frame waiting for it forever.
            let worked = async {
                let start_cycles = t.clock64().await;
                let mut piece = vec![0u8; PIECE.min(len)];
                let mut d = Digest::new();
                let mut at = 0;
                while at < len {
                    let n = PIECE.min(len - at);
                    let buf = &mut piece[..n];
                    t.load(p.frame.offset(at as u64), buf).await?;
                    d.update(buf);
                    at += n;
                }
                let features = Features {
                    magic: MAGIC,
                    id: p.id,
                    digest: d.finish(),
                    len: p.len,
                    entry_cycles,
                    start_cycles,
                    end_cycles: 0,
                };
                drop(piece);
                t.nanosleep(SimDuration::from_ns(p.compute_ns)).await;
                let end_cycles = t.clock64().await;
                t.store(
                    p.features,
                    &Features {
                        end_cycles,
                        ..features
                    }
                    .encode(),
                )
                .await
            }
            .await;
            t.atomic_add_u64(p.lock + 8, 1).await?;
            worked
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoded_frame_is_3110400_bytes_and_differs_between_frames_and_streams() {
        assert_eq!(FRAME_BYTES, 3_110_400);
        let a = pattern(
            FrameId {
                stream: 0,
                frame: 0,
            },
            4096,
        );
        let b = pattern(
            FrameId {
                stream: 0,
                frame: 1,
            },
            4096,
        );
        let c = pattern(
            FrameId {
                stream: 1,
                frame: 0,
            },
            4096,
        );
        assert_eq!(a.len(), 4096);
        assert_eq!(
            a,
            pattern(
                FrameId {
                    stream: 0,
                    frame: 0
                },
                4096
            ),
            "deterministic"
        );
        let same = |x: &[u8], y: &[u8]| x.iter().zip(y).filter(|(p, q)| p == q).count();
        // Independent bytes agree about once in 256.
        assert!(same(&a, &b) < 64 && same(&a, &c) < 64 && same(&b, &c) < 64);
        assert_eq!(
            pattern(
                FrameId {
                    stream: 0,
                    frame: 0
                },
                13
            )
            .len(),
            13
        );
    }

    #[test]
    fn the_digest_changes_with_any_byte_its_position_and_the_length() {
        let bytes = pattern(
            FrameId {
                stream: 3,
                frame: 7,
            },
            1001,
        );
        let d = digest(&bytes);
        for at in [0usize, 7, 8, 500, 999, 1000] {
            let mut spoiled = bytes.clone();
            spoiled[at] ^= 1;
            assert_ne!(digest(&spoiled), d, "byte {at}");
        }
        let mut swapped = bytes.clone();
        swapped.swap(0, 8);
        assert_ne!(digest(&swapped), d, "two words swapped");
        assert_ne!(digest(&bytes[..1000]), d, "one byte shorter");
        let mut padded = bytes.clone();
        padded.push(0);
        assert_ne!(digest(&padded), d, "a zero byte longer");
    }

    #[test]
    fn a_digest_over_pieces_is_the_digest_of_the_whole_and_fill_agrees_with_pattern() {
        let id = FrameId {
            stream: 2,
            frame: 9,
        };
        let whole = pattern(id, 1003);
        for cuts in [vec![], vec![8, 512], vec![3, 5, 13, 1000], vec![1002]] {
            let mut d = Digest::new();
            let mut from = 0;
            for &to in cuts.iter().chain([whole.len()].iter()) {
                d.update(&whole[from..to]);
                from = to;
            }
            assert_eq!(d.finish(), digest(&whole), "cut at {cuts:?}");
        }
        let mut piece = vec![0u8; 99];
        fill(id, 512, &mut piece);
        assert_eq!(piece, whole[512..611]);
    }

    #[test]
    fn kernel_parameters_and_features_survive_their_encoding() {
        let p = KernelParams {
            frame: GpuAddr::Device(0x1000),
            len: FRAME_BYTES,
            features: GpuAddr::Device(0x40_0000),
            lock: 0x80,
            compute_ns: 6_876_000,
            id: FrameId {
                stream: 5,
                frame: 59,
            },
        };
        let bytes = p.encode();
        assert_eq!(KernelParams::decode(&bytes), Some(p));
        assert_eq!(KernelParams::decode(&bytes[..70]), None, "cut short");
        let f = Features {
            magic: MAGIC,
            id: p.id,
            digest: 0xdead_beef,
            len: FRAME_BYTES,
            entry_cycles: 5,
            start_cycles: 10,
            end_cycles: 20,
        };
        let back = Features::decode(&f.encode()).expect("decodes");
        assert_eq!(back, f);
        assert_eq!(back.mismatch(p.id, 0xdead_beef, FRAME_BYTES), None);
        let other = FrameId {
            stream: 5,
            frame: 58,
        };
        assert_eq!(
            back.mismatch(other, 0xdead_beef, FRAME_BYTES).as_deref(),
            Some("the features are of stream 5 frame 59 (3110400 bytes), not of stream 5 frame 58 (3110400 bytes)")
        );
        assert!(back
            .mismatch(p.id, 1, FRAME_BYTES)
            .is_some_and(|m| m.contains("differs")));
        let empty = Features::decode(&[0u8; 64]).expect("decodes");
        assert!(empty
            .mismatch(p.id, 0, FRAME_BYTES)
            .is_some_and(|m| m.starts_with("no feature vector")));
    }
}
