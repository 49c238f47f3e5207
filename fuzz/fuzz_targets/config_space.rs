//! libFuzzer entry for the `config_space` target; the checks live in `smartio_fuzz::config_space`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::config_space(data);
});
