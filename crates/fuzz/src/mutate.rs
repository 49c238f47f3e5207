//! Deterministic mutation of corpus inputs for the stable runner: bit flips, byte
//! insertions, deletions and overwrites, "interesting" integers, splices of two inputs, and
//! for text targets words from a small dictionary of scenario and calibration keys and values.
//!
//! Everything comes from a [`Rng`] seeded by the user: the same seed and corpus give the same
//! sequence of inputs.

/// A small, fast, deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Inputs longer than this are cut (the targets bound their work anyway).
pub const MAX_LEN: usize = 8192;

/// Scenario and calibration words spliced into text inputs.
pub const DICTIONARY: &[&str] = &[
    "[[host]]\n",
    "[[host.device]]\n",
    "[[host.switch]]\n",
    "[[host.ntb]]\n",
    "[[host.vm]]\n",
    "[[cluster_switch]]\n",
    "name = ",
    "kind = ",
    "parent = ",
    "link = ",
    "ram = ",
    "memory = ",
    "pages = ",
    "devices = ",
    "\"lender:nvme0\"",
    "\"lender:nic0.vf1\"",
    "\"nic0.vf2\"",
    ".vf",
    ".vf0",
    ".vf65536",
    "mtu = ",
    "\"2 MiB\"",
    "iommu = ",
    "cores = ",
    "mmio64 = ",
    "connect = ",
    "uplink = ",
    "chip = ",
    "params = ",
    "repeat = ",
    "profile = ",
    "capacity = ",
    "queues = ",
    "namespaces = ",
    "cmb = ",
    "lba_size = ",
    "vfs = ",
    "backing = ",
    "fdid = ",
    "0xc0c00",
    "value = ",
    "source = ",
    "\"gen3 x16\"",
    "\"gen1 x1\"",
    "\"gen5 x32\"",
    "\"64 GiB\"",
    "\"0\"",
    "\"16E\"",
    "\"18446744073709551615\"",
    "\"nvme\"",
    "\"dma\"",
    "\"gpu\"",
    "\"ntb\"",
    "\"root\"",
    "\"ramdisk\"",
    "true",
    "false",
    "0",
    "-1",
    "1e308",
    "nan",
    "inf",
    "-inf",
    "0.0",
    "4294967296",
    "9223372036854775807",
    "{ value = 0, source = \"x\" }",
    "[pcie]\n",
    "[smartio]\n",
    "[vm]\n",
    "irq_handler_ns",
    "page_pin_ns",
    "cpu_overhead_fraction",
    "[cpu]\n",
    "wakeup_ns",
    "interrupt_delivery_ns",
    "[root_complex]\n",
    "peer_forward_ns",
    "chip_latency_spread_ns",
    "dma_window_map_ns",
    "cabled = ",
    "[devices.default]\n",
    "[nvme.ramdisk]\n",
    "max_payload_size",
    "max_read_request_size",
    "[devices.ntb]\n",
    "128",
    "\"4K\"",
    "\n",
    " = ",
    "\"",
    "[",
    "]",
    "{",
    "}",
    ",",
];

const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xfff,
    0x1000,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    u64::MAX,
    u64::MAX - 1,
];

/// One mutant of `input`, possibly spliced with `other`.
pub fn mutate(input: &[u8], other: &[u8], text: bool, rng: &mut Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let choices = if text { 8 } else { 7 };
        match rng.below(choices) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(out.len() + 1);
                let b = rng.next_u64() as u8;
                out.insert(i, b);
            }
            2 if !out.is_empty() => {
                let i = rng.below(out.len());
                let n = 1 + rng.below(16.min(out.len() - i));
                out.drain(i..i + n);
            }
            3 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.next_u64() as u8;
            }
            4 => {
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let width = [1usize, 2, 4, 8][rng.below(4)];
                let i = rng.below(out.len() + 1);
                let bytes = &v.to_le_bytes()[..width];
                let end = (i + width).min(out.len());
                out.splice(i..end, bytes.iter().copied());
            }
            5 if !other.is_empty() => {
                let cut = rng.below(out.len() + 1);
                let from = rng.below(other.len());
                let n = 1 + rng.below(other.len() - from);
                out.truncate(cut);
                out.extend_from_slice(&other[from..from + n]);
            }
            6 if !out.is_empty() => {
                // Duplicate a chunk (repeats an operation or a table).
                let i = rng.below(out.len());
                let n = 1 + rng.below(64.min(out.len() - i));
                let chunk = out[i..i + n].to_vec();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, chunk);
            }
            7 => {
                let word = DICTIONARY[rng.below(DICTIONARY.len())].as_bytes();
                let at = rng.below(out.len() + 1);
                if rng.below(2) == 0 {
                    out.splice(at..at, word.iter().copied());
                } else {
                    let end = (at + word.len()).min(out.len());
                    out.splice(at..end, word.iter().copied());
                }
            }
            _ => {
                let b = rng.next_u64() as u8;
                out.push(b);
            }
        }
    }
    out.truncate(MAX_LEN);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_mutants() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(
                mutate(b"name = \"x\"", b"[[host]]", true, &mut a),
                mutate(b"name = \"x\"", b"[[host]]", true, &mut b)
            );
        }
    }

    #[test]
    fn mutants_change_the_input_and_stay_bounded() {
        let mut rng = Rng::new(1);
        let big = vec![0u8; MAX_LEN];
        let mut changed = 0;
        for _ in 0..200 {
            let m = mutate(&big, &big, false, &mut rng);
            assert!(m.len() <= MAX_LEN);
            changed += usize::from(m != big);
        }
        assert!(changed > 150, "only {changed} of 200 mutants differ");
    }

    #[test]
    fn below_zero_is_zero() {
        assert_eq!(Rng::new(3).below(0), 0);
    }
}
