//! libFuzzer entry for the `calibration` target; the checks live in `smartio_fuzz::calibration`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::calibration(data);
});
