//! libFuzzer entry for the `live_requests` target; the checks live in
//! `smartio_fuzz::live`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::live_requests(data);
});
