//! libFuzzer entry for the `vm_config` target; the checks live in `smartio_fuzz::vm_config`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::vm_config(data);
});
