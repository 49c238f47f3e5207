//! The HTTP side (tiny_http): one thread takes requests and answers `GET /` (the page, with
//! the latest update in it) and `GET /metrics` (the daemon asked afresh, so a scrape has the
//! figures of that moment); each `GET /events` stream gets a thread of its own that sends
//! the latest update as a Server-Sent Event when it changes and at least every
//! [`HEARTBEAT`], until the browser goes away.

use super::error::WebError;
use super::watch::{self, Latest, Update};
use super::{metrics, page};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiny_http::{Header, Method, Request as HttpRequest, Response, Server};

/// The longest an event stream goes without an event.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// Event streams served at once (each holds a thread); more are answered 503.
pub const MAX_STREAMS: usize = 32;

/// Starts the thread that takes requests.
pub fn start(server: Server, socket: String, latest: Latest) -> Result<(), WebError> {
    std::thread::Builder::new()
        .name("web-http".into())
        .spawn(move || {
            let streams = Arc::new(AtomicUsize::new(0));
            for request in server.incoming_requests() {
                route(request, &socket, &latest, &streams);
            }
        })
        .map(|_| ())
        .map_err(|source| WebError::Thread {
            what: "HTTP",
            source,
        })
}

fn header(name: &str, value: &str) -> Option<Header> {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

/// A response of `status` with `body` of `content_type`, never cached.
fn text(status: u16, content_type: &str, body: String) -> Response<std::io::Cursor<Vec<u8>>> {
    let mut response = Response::from_string(body).with_status_code(status);
    for h in [
        header("Content-Type", content_type),
        header("Cache-Control", "no-store"),
    ]
    .into_iter()
    .flatten()
    {
        response.add_header(h);
    }
    response
}

/// The picture version a stream's page has (`/events?picture=N`; 0: none).
fn picture_of(url: &str) -> u64 {
    url.split_once('?')
        .map_or("", |(_, query)| query)
        .split('&')
        .find_map(|pair| pair.strip_prefix("picture="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn route(request: HttpRequest, socket: &str, latest: &Latest, streams: &Arc<AtomicUsize>) {
    let path = request.url().split('?').next().unwrap_or("").to_string();
    let has_picture = picture_of(request.url());
    let response = match (request.method(), path.as_str()) {
        (Method::Get, "/") => text(200, "text/html; charset=utf-8", page::render(&latest.now())),
        (Method::Get, "/metrics") => match watch::ask_once(socket) {
            Ok(stats) => text(200, metrics::CONTENT_TYPE, metrics::render(&stats)),
            Err(why) => text(503, "text/plain; charset=utf-8", format!("{why}\n")),
        },
        (Method::Get, "/events") => {
            if streams.fetch_add(1, Ordering::SeqCst) >= MAX_STREAMS {
                streams.fetch_sub(1, Ordering::SeqCst);
                text(
                    503,
                    "text/plain; charset=utf-8",
                    format!("{MAX_STREAMS} event streams are open already\n"),
                )
            } else {
                let (latest, open) = (latest.clone(), Arc::clone(streams));
                let spawned =
                    std::thread::Builder::new()
                        .name("web-events".into())
                        .spawn(move || {
                            stream(request.into_writer(), &latest, has_picture);
                            open.fetch_sub(1, Ordering::SeqCst);
                        });
                if spawned.is_err() {
                    // The request went with the closure: the browser sees the stream close
                    // and tries again.
                    streams.fetch_sub(1, Ordering::SeqCst);
                    eprintln!("smartio: --web: no thread for an event stream");
                }
                return;
            }
        }
        (Method::Get, _) => text(
            404,
            "text/plain; charset=utf-8",
            format!("no page {path}; try / , /events or /metrics\n"),
        ),
        _ => text(
            405,
            "text/plain; charset=utf-8",
            "only GET is served\n".to_string(),
        ),
    };
    // A browser that went away before its answer: nothing to do about it.
    let _ = request.respond(response);
}

/// An event stream on `out` (the connection itself: the head is written here, the body has
/// no length and ends when the connection closes), until a write fails; the page has picture
/// `has_picture` already.
fn stream(mut out: Box<dyn Write + Send>, latest: &Latest, has_picture: u64) {
    let head = "HTTP/1.1 200 OK\r\n\
                Content-Type: text/event-stream; charset=utf-8\r\n\
                Cache-Control: no-store\r\n\
                Connection: close\r\n\r\n\
                retry: 1000\n\n";
    if out
        .write_all(head.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return;
    }
    let mut sent: Option<(u64, Instant)> = None;
    let mut picture_sent = has_picture;
    loop {
        let seen = sent.map_or(0, |(v, _)| v);
        let patience = sent.map_or(Duration::ZERO, |(_, at)| {
            HEARTBEAT.saturating_sub(at.elapsed())
        });
        let u = latest.wait_newer(seen, patience);
        let due = sent.is_none_or(|(v, at)| u.version > v || at.elapsed() >= HEARTBEAT);
        if !due {
            continue;
        }
        let event = event(&u, picture_sent);
        if out
            .write_all(event.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return;
        }
        picture_sent = u.picture_version;
        sent = Some((u.version, Instant::now()));
    }
}

/// One event: `update` with the update as JSON, the picture in it only if it is newer than
/// `picture_sent`.
pub fn event(u: &Update, picture_sent: u64) -> String {
    let json = page::update_json(u, u.picture_version > picture_sent);
    format!("event: update\ndata: {json}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_carries_the_picture_only_when_the_page_has_an_older_one() {
        let u = Update {
            version: 2,
            picture: Arc::new("<svg/>".into()),
            picture_version: 5,
            ..Update::default()
        };
        let with = event(&u, 4);
        assert!(with.starts_with("event: update\ndata: {") && with.ends_with("}\n\n"));
        assert!(with.contains("\"picture\":\"\\u003csvg/>\""), "{with}");
        assert!(!event(&u, 5).contains("\"picture\":"));
        assert_eq!(picture_of("/events?picture=5"), 5);
        assert_eq!(picture_of("/events?x=1&picture=7"), 7);
        assert_eq!(picture_of("/events?picture=x"), 0);
        assert_eq!(picture_of("/events"), 0);
    }
}
