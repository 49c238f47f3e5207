//! What the daemon's tests share: a daemon on back-to-back with a socket of its own, and
//! sessions that send requests as a program would.

use smartio_calibration::Calibration;
use smartio_live::protocol::{Reply, Request};
use smartio_live::Daemon;
use std::time::Duration;

/// A socket path of its own for test `name` (its directory emptied).
pub fn socket_path(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("live-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    dir.join("cluster.sock")
        .to_str()
        .expect("utf-8")
        .to_string()
}

/// A daemon serving back-to-back at [`socket_path`]`(name)`.
pub fn daemon(name: &str) -> Daemon {
    Daemon::up(
        "back-to-back",
        &Calibration::default_embedded(),
        &socket_path(name),
    )
    .expect("the daemon starts")
}

/// Session `session`'s answer to `request`.
pub fn ask(d: &mut Daemon, session: u64, request: Request) -> Reply {
    d.request(session, request, Duration::from_secs(5))
        .expect("an answer in time")
}

/// A new session that said it runs on `host`.
pub fn hello(d: &mut Daemon, host: &str) -> u64 {
    let s = d.open_session().expect("a session");
    let reply = ask(
        d,
        s,
        Request::Hello {
            host: host.into(),
            attach: None,
        },
    );
    assert!(matches!(reply, Reply::Hello { .. }), "{reply:?}");
    s
}

/// The handle an answer carries.
pub fn handle(reply: Reply) -> u64 {
    match reply {
        Reply::Segment { handle, .. }
        | Reply::Remote { handle, .. }
        | Reply::Mapped { handle, .. }
        | Reply::Interrupt { handle, .. }
        | Reply::Made(handle) => handle,
        other => panic!("no handle in {other:?}"),
    }
}
