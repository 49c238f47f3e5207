//! Multi-stream video analysis on a pool of GPUs (Paper II).
