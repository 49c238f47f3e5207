//! Records the cargo profile directory this binary is built in (`target/release`), where the
//! build leaves libsisci.so, so that `smartio cluster install` finds the library from an
//! installed copy of the binary (`cargo install --path crates/cli --target-dir target`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // OUT_DIR is <target>/<profile>/build/smartio-cli-<hash>/out.
    if let Some(profile) = std::env::var_os("OUT_DIR")
        .map(std::path::PathBuf::from)
        .and_then(|out| out.ancestors().nth(3).map(std::path::Path::to_path_buf))
    {
        println!("cargo:rustc-env=SMARTIO_BUILD_DIR={}", profile.display());
    }
}
