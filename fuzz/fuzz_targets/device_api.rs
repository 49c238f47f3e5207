//! libFuzzer entry for the `device_api` target; the checks live in `smartio_fuzz::device_api`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::device_api(data);
});
