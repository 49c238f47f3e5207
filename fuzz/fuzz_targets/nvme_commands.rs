//! libFuzzer entry for the `nvme_commands` target; the checks live in `smartio_fuzz::nvme_commands`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = smartio_fuzz::nvme_commands(data);
});
