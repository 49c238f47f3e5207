//! Data-parallel CNN training on GPUs and an NVMe (Paper V §7.2, Fig. 30).
