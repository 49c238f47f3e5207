//! A one-node Slurm cluster of the test's own: `munged`, `slurmctld` and `slurmd` started in a
//! directory of the test (munge key, `slurm.conf`, munge socket, state, spool, pid files and
//! logs all inside it), on TCP ports that were free a moment before, and stopped when the
//! value is dropped — on a failing test too: its jobs cancelled, its daemons ended, their logs
//! printed.
//!
//! ```text
//!   sbatch / srun / squeue ──SLURM_CONF──► slurmctld :ctld_port ──► slurmd :slurmd_port
//!                  └──────── munge (DIR/munge.socket) ◄──┴──────────────┘
//! ```

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The daemons, in the order they start.
const DAEMONS: [&str; 3] = ["munged", "slurmctld", "slurmd"];
/// The client programs the test and the README's script use.
const CLIENTS: [&str; 6] = ["sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel"];
/// How long munge's socket and then the idle node may take to appear.
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long the jobs may take to end when cancelled, and a daemon after SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(5);
/// How often a condition is looked at again.
const POLL: Duration = Duration::from_millis(100);

pub struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    /// Each daemon started, by name, in start order.
    daemons: Vec<(&'static str, Child)>,
}

/// Where `program` is installed: the `PATH`, then the sbin directories a non-login root shell
/// may lack.
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn program(name: &str) -> PathBuf {
    find(name).unwrap_or_else(|| panic!("{name} is installed (checked before)"))
}

/// Why this machine cannot run a cluster (programs missing, not root), or `None` if it can.
pub fn unavailable() -> Option<String> {
    let missing: Vec<&str> = DAEMONS
        .iter()
        .chain(CLIENTS.iter())
        .copied()
        .filter(|p| find(p).is_none())
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "not installed: {missing:?} (apt-get install slurmctld slurmd slurm-client munge)"
        ));
    }
    // `/proc/self` belongs to this process's effective user.
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid());
    if !matches!(uid, Ok(0)) {
        return Some(format!(
            "the daemons run as SlurmUser=root; this is uid {uid:?}"
        ));
    }
    None
}

/// A TCP port nothing listens on now, for each of `n` daemons (all bound at once, so distinct).
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind(("127.0.0.1", 0)).expect("a free port"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("its address").port())
}

/// This machine's short host name, as `slurmd` and `slurmctld` see themselves.
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
    name.trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .to_string()
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// Polls `done` until it holds, or panics after `limit` naming `what`.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(POLL);
    }
}

/// Runs `cmd` to its end, killing it and failing after `limit`.
fn run(mut cmd: Command, limit: Duration) -> Output {
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{shown}: {e}"));
    let start = Instant::now();
    while child.try_wait().expect("waits").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{shown}: still running after {limit:?}");
        }
        std::thread::sleep(POLL);
    }
    child.wait_with_output().expect("its output")
}

impl Cluster {
    /// Configures a cluster of one node (this machine, all its CPUs, one partition) in `dir`
    /// and starts it; returns once the node is idle. Check `unavailable` first.
    pub fn start(dir: &Path) -> Cluster {
        // munged refuses a socket directory others cannot enter, or a key others can read.
        for sub in ["", "state", "spool", "log"] {
            std::fs::create_dir_all(dir.join(sub)).expect("a cluster directory");
            set_mode(&dir.join(sub), 0o755);
        }
        let key = dir.join("munge.key");
        std::fs::write(&key, random_key()).expect("the munge key");
        set_mode(&key, 0o400);

        let [ctld_port, slurmd_port] = free_ports::<2>();
        let host = hostname();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let d = dir.display();
        let conf = dir.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=smartio-test\n\
                 SlurmctldHost={host}(127.0.0.1)\n\
                 SlurmctldPort={ctld_port}\n\
                 SlurmdPort={slurmd_port}\n\
                 SlurmUser=root\n\
                 SlurmdUser=root\n\
                 AuthType=auth/munge\n\
                 CredType=cred/munge\n\
                 AuthInfo=socket={d}/munge.socket\n\
                 StateSaveLocation={d}/state\n\
                 SlurmdSpoolDir={d}/spool\n\
                 SlurmctldPidFile={d}/slurmctld.pid\n\
                 SlurmdPidFile={d}/slurmd.pid\n\
                 ProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\n\
                 SelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_Core\n\
                 MpiDefault=none\n\
                 ReturnToService=2\n\
                 NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
                 PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP\n"
            ),
        )
        .expect("slurm.conf");

        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf,
            daemons: Vec::new(),
        };
        let socket = format!("--socket={d}/munge.socket");
        cluster.daemon(
            "munged",
            &[
                "--foreground",
                &socket,
                &format!("--key-file={d}/munge.key"),
                &format!("--pid-file={d}/munged.pid"),
                &format!("--log-file={d}/log/munged.log"),
                &format!("--seed-file={d}/munged.seed"),
            ],
        );
        wait_for("munged's socket", START_LIMIT, || {
            cluster.alive();
            dir.join("munge.socket").exists()
        });
        // -D: in the foreground, logging to its standard error (the log directory).
        cluster.daemon("slurmctld", &["-D"]);
        cluster.daemon("slurmd", &["-D"]);
        wait_for("the node idle in sinfo", START_LIMIT, || {
            cluster.alive();
            let out = cluster.client("sinfo").args(["-h", "-o", "%T"]).output();
            out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
        cluster
    }

    fn daemon(&mut self, name: &'static str, args: &[&str]) {
        let log = File::create(self.dir.join("log").join(format!("{name}.out"))).expect("a log");
        let child = Command::new(program(name))
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log again"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        self.daemons.push((name, child));
    }

    /// Panics (the logs follow from `drop`) if a daemon has ended.
    fn alive(&mut self) {
        for (name, child) in &mut self.daemons {
            if let Some(status) = child.try_wait().expect("waits") {
                panic!("{name} ended: {status}");
            }
        }
    }

    /// A Slurm client program (`sbatch`, `srun`, ...) talking to this cluster.
    pub fn client(&self, name: &str) -> Command {
        let mut cmd = Command::new(program(name));
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// Submits `script` (in `cwd`, with `path` as its `PATH`); returns the job's id.
    pub fn sbatch(&self, cwd: &Path, script: &str, path: &str) -> String {
        let mut sbatch = self.client("sbatch");
        sbatch
            .args(["--parsable", script])
            .current_dir(cwd)
            .env("PATH", path);
        let out = run(sbatch, Duration::from_secs(30));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "sbatch {script}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // `--parsable`: the job id, then `;cluster` where there are several.
        let id = stdout.trim().split(';').next().unwrap_or_default();
        assert!(!id.is_empty(), "sbatch printed no job id");
        id.to_string()
    }

    /// Waits until job `id` (every task of an array) has left the queue; returns what
    /// slurmctld says of each of its jobs, one line each (it keeps finished jobs for
    /// MinJobAge, 300 s).
    pub fn wait(&self, id: &str, limit: Duration) -> Vec<String> {
        wait_for(&format!("job {id} to finish"), limit, || {
            let out = self
                .client("squeue")
                .args(["-h", "-j", id])
                .output()
                .expect("squeue runs");
            out.status.success() && out.stdout.is_empty()
        });
        let out = self
            .client("scontrol")
            .args(["show", "job", "--oneliner", id])
            .output()
            .expect("scontrol runs");
        assert!(out.status.success(), "scontrol show job {id}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Runs `args` with srun (in `cwd`, with `path` as its `PATH`); panics if it fails.
    pub fn srun(&self, cwd: &Path, args: &[&str], path: &str) {
        let mut srun = self.client("srun");
        srun.args(args).current_dir(cwd).env("PATH", path);
        let out = run(srun, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "srun {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn log_tails(&self) {
        for (name, _) in &self.daemons {
            let log = self.dir.join("log").join(format!("{name}.out"));
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(30)..].join("\n");
            eprintln!("--- {} (last 30 lines)\n{tail}", log.display());
        }
    }
}

/// What the jobs run from `dir` printed: its `slurm-*.out` files, each under its name.
pub fn job_outputs(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "out"));
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            format!("--- {}\n{text}", f.display())
        })
        .collect()
}

/// 1024 random bytes, as `mungekey` makes.
fn random_key() -> Vec<u8> {
    use std::io::Read;
    let mut key = vec![0; 1024];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .expect("random bytes");
    key
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.log_tails();
        }
        // The jobs first, while slurmd is there to end their processes.
        let ctld_running = self
            .daemons
            .iter_mut()
            .any(|(name, c)| *name == "slurmctld" && c.try_wait().is_ok_and(|s| s.is_none()));
        if ctld_running {
            let cancelled = self
                .client("scancel")
                .args(["--user=root"])
                .stderr(Stdio::null())
                .status();
            if cancelled.is_ok_and(|s| s.success()) {
                let start = Instant::now();
                while start.elapsed() < STOP_LIMIT
                    && !self
                        .client("squeue")
                        .args(["-h"])
                        .output()
                        .is_ok_and(|o| o.stdout.is_empty())
                {
                    std::thread::sleep(POLL);
                }
            }
        }
        // Then the daemons, last started first: SIGTERM, then SIGKILL if one lingers.
        while let Some((name, mut child)) = self.daemons.pop() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let start = Instant::now();
            while child.try_wait().is_ok_and(|s| s.is_none()) && start.elapsed() < STOP_LIMIT {
                std::thread::sleep(POLL);
            }
            if child.try_wait().is_ok_and(|s| s.is_none()) {
                eprintln!("{name} did not end on SIGTERM: killed");
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
