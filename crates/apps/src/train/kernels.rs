//! The training step's GPU kernels and what they compute on real bytes.
//!
//! - `step` (forward and backward on a sub-batch): reads every image record the copy put in
//!   device memory, checks it against the dataset's content for the id in its header, writes
//!   the count of records that were wrong, the first wrong one's id and the ids it found into
//!   a small result buffer,
//!   sleeps the GPU's calibrated compute for the sub-batch, and writes the replica's
//!   gradient: word `k` is `seed + k` (wrapping `u32`), `seed` derived from the step, the
//!   replica and the ids it trained on ([`gradient_seed`]).
//! - `reduce`: adds a received gradient chunk into the replica's own, word by word
//!   (wrapping), in the time the GPU's memory needs to read two chunks and write one.
//! - `update`: subtracts the reduced gradient from the weights (the optimizer step), in the
//!   time of reading two buffers and writing one.
//!
//! Every kernel runs one thread whose parameters are little-endian `u64`s; a missing
//! parameter or an access outside device memory faults the launch.

use smartio_devices::gpu::kernel::{FaultReason, KernelFault, KernelFn, KernelFuture};
use smartio_devices::gpu::spec::GpuAddr;
use smartio_machine::Agent;
use smartio_platform::SimDuration;
use smartio_workloads::gpu::get_u64;
use std::rc::Rc;

/// Kernel names in the cluster's library.
pub const STEP: &str = "smartio.train.step";
/// See [`STEP`].
pub const REDUCE: &str = "smartio.train.reduce";
/// See [`STEP`].
pub const UPDATE: &str = "smartio.train.update";

/// Bytes of a result buffer holding `images` ids: the count of wrong records, the first
/// wrong record's id (`u64::MAX` if none), then the ids.
pub fn result_bytes(images: u64) -> u64 {
    8 * (2 + images)
}

/// The content of dataset image `id` (`len` bytes): its id in the first 8 bytes, then words
/// that differ per image and per position, so a record from the wrong place, shifted or
/// partly stale never passes for the right one.
pub fn image(id: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    fill_image(id, &mut out);
    out
}

fn fill_image(id: u64, out: &mut [u8]) {
    for (w, chunk) in out.chunks_mut(8).enumerate() {
        let word = if w == 0 {
            id
        } else {
            mix(id.wrapping_mul(0x1_0000_0001).wrapping_add(w as u64))
        };
        let bytes = word.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// SplitMix64's finalizer: distinct inputs give unrelated outputs.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The gradient seed of `replica` at global step `step` having trained on images whose ids
/// sum to `id_sum`.
pub fn gradient_seed(step: u64, replica: u64, id_sum: u64) -> u32 {
    mix(mix(step ^ (replica << 48)).wrapping_add(id_sum)) as u32
}

/// Word `k` of a gradient with `seed`.
pub fn gradient_word(seed: u32, k: u64) -> u32 {
    seed.wrapping_add(k as u32)
}

/// Word `k` of the weights every replica starts from.
pub fn initial_weight(k: u64) -> u32 {
    (k as u32).wrapping_mul(2_654_435_761)
}

/// Parameters of a `step` launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepParams {
    /// Device offset of the first record.
    pub images: u64,
    /// Records in the sub-batch.
    pub count: u64,
    /// Bytes from one record to the next (a whole number of blocks).
    pub record: u64,
    /// Bytes of an image inside its record.
    pub image: u64,
    /// Compute per image in picoseconds.
    pub compute_ps: u64,
    /// Device offset of the gradient.
    pub gradient: u64,
    /// Bytes of the gradient (a multiple of 4).
    pub gradient_bytes: u64,
    /// Device offset of the result buffer ([`result_bytes`] of `count`).
    pub result: u64,
    /// Global step number.
    pub step: u64,
    /// The replica's index.
    pub replica: u64,
}

impl StepParams {
    /// The launch's parameter bytes.
    pub fn encode(&self) -> Vec<u8> {
        [
            self.images,
            self.count,
            self.record,
            self.image,
            self.compute_ps,
            self.gradient,
            self.gradient_bytes,
            self.result,
            self.step,
            self.replica,
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
    }

    fn decode(p: &[u8]) -> Option<StepParams> {
        let at = |i: usize| get_u64(p, 8 * i);
        Some(StepParams {
            images: at(0)?,
            count: at(1)?,
            record: at(2)?,
            image: at(3)?,
            compute_ps: at(4)?,
            gradient: at(5)?,
            gradient_bytes: at(6)?,
            result: at(7)?,
            step: at(8)?,
            replica: at(9)?,
        })
    }
}

/// Parameters of a `reduce` or `update` launch: `dst[k] = dst[k] op src[k]` over `bytes`,
/// taking `ps` picoseconds.
pub fn elementwise_params(dst: u64, src: u64, bytes: u64, ps: u64) -> Vec<u8> {
    [dst, src, bytes, ps]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

fn missing_params() -> KernelFault {
    KernelFault {
        address: GpuAddr::Device(0),
        reason: FaultReason::OutsideMemory { memory: 0 },
    }
}

/// A buffer length from a parameter, faulting instead of allocating absurd sizes.
fn length(v: u64) -> Result<usize, KernelFault> {
    usize::try_from(v)
        .ok()
        .filter(|&n| n <= 1 << 31)
        .ok_or_else(missing_params)
}

/// The `step` kernel.
pub fn step() -> KernelFn<Agent> {
    Rc::new(|t| -> KernelFuture {
        Box::pin(async move {
            let p = StepParams::decode(t.params()).ok_or_else(missing_params)?;
            let image_len = length(p.image)?;
            let mut got = vec![0u8; image_len];
            let mut want = vec![0u8; image_len];
            let mut ids = Vec::with_capacity(length(p.count)?);
            let mut wrong = 0u64;
            let mut first_wrong = u64::MAX;
            let mut id_sum = 0u64;
            for i in 0..p.count {
                let at = p.images + i * p.record;
                t.load(GpuAddr::Device(at), &mut got).await?;
                let id = get_u64(&got, 0).unwrap_or(u64::MAX);
                fill_image(id, &mut want);
                if got != want {
                    wrong += 1;
                    first_wrong = first_wrong.min(id);
                }
                ids.push(id);
                id_sum = id_sum.wrapping_add(id);
            }
            t.nanosleep(SimDuration::from_ps(p.compute_ps.saturating_mul(p.count)))
                .await;
            let mut result = Vec::with_capacity(8 * (ids.len() + 2));
            result.extend_from_slice(&wrong.to_le_bytes());
            result.extend_from_slice(&first_wrong.to_le_bytes());
            for id in &ids {
                result.extend_from_slice(&id.to_le_bytes());
            }
            t.store(GpuAddr::Device(p.result), &result).await?;
            let seed = gradient_seed(p.step, p.replica, id_sum);
            let words = p.gradient_bytes / 4;
            let mut g = Vec::with_capacity(length(p.gradient_bytes)?);
            for k in 0..words {
                g.extend_from_slice(&gradient_word(seed, k).to_le_bytes());
            }
            t.store(GpuAddr::Device(p.gradient), &g).await
        })
    })
}

/// `reduce` (`add`) or `update` (`!add`: subtract).
fn elementwise(add: bool) -> KernelFn<Agent> {
    Rc::new(move |t| -> KernelFuture {
        Box::pin(async move {
            let p = t.params();
            let (dst, src, bytes, ps) = (|| {
                Some((
                    get_u64(p, 0)?,
                    get_u64(p, 8)?,
                    get_u64(p, 16)?,
                    get_u64(p, 24)?,
                ))
            })()
            .ok_or_else(missing_params)?;
            let len = length(bytes)?;
            let mut a = vec![0u8; len];
            let mut b = vec![0u8; len];
            t.load(GpuAddr::Device(dst), &mut a).await?;
            t.load(GpuAddr::Device(src), &mut b).await?;
            for (x, y) in a.chunks_exact_mut(4).zip(b.chunks_exact(4)) {
                let (u, v) = (
                    u32::from_le_bytes([x[0], x[1], x[2], x[3]]),
                    u32::from_le_bytes([y[0], y[1], y[2], y[3]]),
                );
                let r = if add {
                    u.wrapping_add(v)
                } else {
                    u.wrapping_sub(v)
                };
                x.copy_from_slice(&r.to_le_bytes());
            }
            t.nanosleep(SimDuration::from_ps(ps)).await;
            t.store(GpuAddr::Device(dst), &a).await
        })
    })
}

/// The `reduce` kernel.
pub fn reduce() -> KernelFn<Agent> {
    elementwise(true)
}

/// The `update` kernel.
pub fn update() -> KernelFn<Agent> {
    elementwise(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_carry_their_id_and_differ_from_each_other() {
        let a = image(7, 4096);
        let b = image(8, 4096);
        assert_eq!(get_u64(&a, 0), Some(7));
        assert_ne!(a[8..], b[8..]);
        assert_eq!(image(7, 4096), a, "deterministic");
        assert_eq!(image(7, 13).len(), 13, "a tail shorter than a word");
    }

    #[test]
    fn step_parameters_survive_encoding_and_a_short_block_is_refused() {
        let p = StepParams {
            images: 1,
            count: 2,
            record: 3,
            image: 4,
            compute_ps: 5,
            gradient: 6,
            gradient_bytes: 7,
            result: 8,
            step: 9,
            replica: 10,
        };
        let bytes = p.encode();
        assert_eq!(StepParams::decode(&bytes), Some(p));
        assert_eq!(StepParams::decode(&bytes[..bytes.len() - 1]), None);
    }

    #[test]
    fn gradient_seeds_depend_on_step_replica_and_images() {
        let s = gradient_seed(1, 0, 10);
        assert_ne!(s, gradient_seed(2, 0, 10));
        assert_ne!(s, gradient_seed(1, 1, 10));
        assert_ne!(s, gradient_seed(1, 0, 11));
    }
}
