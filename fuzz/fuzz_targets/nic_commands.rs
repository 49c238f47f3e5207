//! libFuzzer entry for the `nic_commands` target; the checks live in `smartio_fuzz::nic_commands`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::nic_commands(data);
});
