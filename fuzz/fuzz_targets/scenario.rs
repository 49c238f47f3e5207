//! libFuzzer entry for the `scenario` target; the checks live in `smartio_fuzz::scenario`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::scenario(data);
});
