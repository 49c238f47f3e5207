//! libFuzzer entry for the `gpu_commands` target; the checks live in `smartio_fuzz::gpu_commands`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::gpu_commands(data);
});
