//! libFuzzer entry for the `nbd_requests` target; the checks live in `smartio_fuzz::nbd_requests`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::nbd_requests(data);
});
