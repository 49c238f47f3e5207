//! Applications on local and lent devices, the way the papers ran them: data-parallel CNN
//! training on two GPUs and an NVMe (Paper V §7.2, Fig. 30; Paper IV Fig. 21) and
//! multi-stream video analysis on a pool of GPUs (Paper II). The one input of each that is
//! not derived from the fabric — the GPU's compute per training image or per video frame —
//! comes from the calibration's `[gpu.*]` profile of each GPU; everything else (copies,
//! exchanges, I/O) runs on the emulated devices and paths.

pub mod train;
pub mod video;
