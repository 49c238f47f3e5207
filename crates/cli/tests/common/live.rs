//! Running C programs on the live engine: the SISCI headers and library installed by
//! `smartio cluster install`, a C compiler, and a cluster daemon on a socket of its own.
//!
//! A C compiler is needed; without one the tests say SKIPPED, unless CI requires it
//! (`SMARTIO_REQUIRE_C_COMPILER`), where they fail.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_smartio");

pub fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sisci-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Whether `program --version` runs and succeeds (the tool is installed).
pub fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The C compiler (`$CC`, else `cc`), if there is one.
pub fn compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    if runs(&cc) {
        return Some(cc);
    }
    assert!(
        std::env::var_os("SMARTIO_REQUIRE_C_COMPILER").is_none(),
        "no C compiler ({cc})"
    );
    eprintln!("SKIPPED: no C compiler ({cc}; apt-get install gcc)");
    None
}

/// The SISCI headers and library installed under `dir/prefix`, and a compiler.
pub struct Sdk {
    /// The C compiler.
    pub cc: String,
    /// The install prefix (`cluster install --prefix`).
    pub prefix: PathBuf,
}

impl Sdk {
    pub fn install(dir: &Path) -> Option<Sdk> {
        let cc = compiler()?;
        let prefix = dir.join("prefix");
        let out = Command::new(BIN)
            .args(["cluster", "install", "--prefix"])
            .arg(&prefix)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for header in [
            "include/sisci_api.h",
            "include/sisci_types.h",
            "include/sisci_error.h",
        ] {
            assert!(prefix.join(header).is_file(), "{header} installed");
        }
        Some(Sdk { cc, prefix })
    }

    /// Builds `source` with -Wall -Werror -Wextra as SISCI programs are built.
    pub fn build(&self, source: &Path) -> PathBuf {
        let exe = self.prefix.join(source.file_stem().unwrap());
        let p = &self.prefix;
        let out = Command::new(&self.cc)
            .args([
                "-std=gnu11",
                "-Wall",
                "-Werror",
                "-Wextra",
                "-O2",
                "-D_REENTRANT",
            ])
            .arg(format!("-I{}", p.join("include").display()))
            .arg(format!("-I{}", p.join("include/dis").display()))
            .arg(source)
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", p.join("lib64").display()))
            .arg("-lsisci")
            .arg(format!("-Wl,-rpath,{}", p.join("lib64").display()))
            .arg("-lpthread")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} does not build:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }
}

/// A cluster daemon on a socket of its own; stopped with `cluster down` when dropped.
pub struct Live {
    child: Child,
    /// The daemon's socket.
    pub sock: PathBuf,
    _stdout: BufReader<ChildStdout>,
}

impl Live {
    pub fn up(dir: &Path, scenario: &str) -> Live {
        Live::up_with(dir, scenario, &[]).0
    }

    /// A daemon started with `extra` arguments too; what it said as it came up.
    pub fn up_with(dir: &Path, scenario: &str, extra: &[&str]) -> (Live, String) {
        let sock = dir.join("cluster.sock");
        let mut child = Command::new(BIN)
            .args(["cluster", "up", "--scenario", scenario, "--socket"])
            .arg(&sock)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut said = String::new();
        while !said.contains("programs run as") {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the daemon ended: {said}"
            );
            said.push_str(&line);
        }
        (
            Live {
                child,
                sock,
                _stdout: stdout,
            },
            said,
        )
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A program of `host`.
    pub fn program(&self, host: &str, exe: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(exe);
        // cargo's test environment points the loader at target/ (where an older
        // libsisci.so may be): the program uses the one installed, as its rpath says.
        c.args(args)
            .env_remove("LD_LIBRARY_PATH")
            .env("SMARTIO_HOST", host)
            .env("SMARTIO_SOCKET", &self.sock)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let down = Command::new(BIN)
            .args(["cluster", "down", "--socket"])
            .arg(&self.sock)
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        assert!(down.is_ok_and(|s| s.success()) || std::thread::panicking());
    }
}

/// Waits for `child`, killing it after `limit` (a hung program fails the test instead of
/// hanging it).
pub fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "a program did not finish in {limit:?}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn succeeded(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
