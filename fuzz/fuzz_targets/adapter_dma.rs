//! libFuzzer entry for the `adapter_dma` target; the checks live in `smartio_fuzz::adapter_dma`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::adapter_dma(data);
});
