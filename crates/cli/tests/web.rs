//! `cluster up --web`: the live view of a running cluster, from outside — its Prometheus
//! metrics parsed strictly and checked against `cluster stats --json`, the README's script,
//! and the page in a real headless browser (Debian's chromium, driven through chromedriver
//! over the W3C WebDriver protocol) following a C program's borrow within a second.
//!
//! The browser test needs `/usr/bin/chromium` and `/usr/bin/chromedriver`; without them it
//! says SKIPPED, unless CI requires them (`SMARTIO_REQUIRE_BROWSER`), where it fails. The C
//! programs need a C compiler (`SMARTIO_REQUIRE_C_COMPILER`, as in `sisci.rs`).

use crate::common;

use common::live::{dir, finish, repo, succeeded, Live, Sdk};
use common::readme_script;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// A plain-HTTP client that reports every status (chromedriver answers errors as JSON).
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into()
}

/// `GET url`: the status and the body.
fn get(url: &str) -> (u16, String) {
    let mut response = agent().get(url).call().expect("an HTTP answer");
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().expect("a text body");
    (status, body)
}

/// The daemon's web view: a cluster started with `--web 127.0.0.1:0` and the URL it printed.
fn up_with_web(dir: &Path, scenario: &str) -> (Live, String) {
    let (live, said) = Live::up_with(dir, scenario, &["--web", "127.0.0.1:0"]);
    let url = said
        .lines()
        .find_map(|l| l.strip_prefix("live view at "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no URL printed:\n{said}"))
        .to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with('/'),
        "{url}"
    );
    (live, url)
}

// ---------------------------------------------------------------------------------------
// The Prometheus text format, parsed strictly (version 0.0.4 as Prometheus reads it).

/// One scrape: each series (`name{label="value",...}` with labels sorted) and its value, and
/// each metric's type.
#[derive(Debug, Clone, PartialEq)]
struct Scrape {
    samples: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

impl Scrape {
    fn value(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no series {series} in {:?}", self.samples.keys()))
    }
}

fn metric_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn label_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

/// Fails the parse with `why` (and the line) unless `ok`.
macro_rules! ensure {
    ($ok:expr, $($why:tt)*) => {
        if !$ok {
            return Err(format!($($why)*));
        }
    };
}

/// `{a="x",b="y"}` (after the metric's name): the labels, unescaped, and what follows.
fn parse_labels(text: &str, line: &str) -> Result<(Vec<(String, String)>, String), String> {
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut chars = text.chars().peekable();
    ensure!(chars.next() == Some('{'), "no labels: {line}");
    loop {
        if chars.peek() == Some(&'}') {
            chars.next();
            break;
        }
        let name: String = chars.by_ref().take_while(|&c| c != '=').collect();
        ensure!(label_name_ok(&name), "label name {name:?}: {line}");
        ensure!(chars.next() == Some('"'), "a quoted value: {line}");
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}: {line}")),
                },
                Some('"') => break,
                Some('\n') | None => return Err(format!("unterminated value: {line}")),
                Some(c) => value.push(c),
            }
        }
        ensure!(
            !labels.iter().any(|(n, _)| *n == name),
            "label {name} twice: {line}"
        );
        labels.push((name, value));
        match chars.next() {
            Some(',') => continue,
            Some('}') => break,
            other => return Err(format!("expected , or }} not {other:?}: {line}")),
        }
    }
    Ok((labels, chars.collect()))
}

/// Parses `text`, refusing anything the format does not allow: a sample before its metric's
/// `# HELP` and `# TYPE`, a second HELP or TYPE, an unknown type, a counter not named
/// `*_total`, a bad name or label, a value that is not a number, a series twice.
fn try_parse_prometheus(text: &str) -> Result<Scrape, String> {
    ensure!(
        text.ends_with('\n'),
        "the text does not end with a line feed"
    );
    let mut samples = BTreeMap::new();
    let mut types = BTreeMap::new();
    let mut helped = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        ensure!(!line.is_empty(), "an empty line");
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let Some((name, help)) = rest.split_once(' ') else {
                return Err(format!("HELP without a text: {line}"));
            };
            ensure!(metric_name_ok(name) && !help.is_empty(), "{line}");
            ensure!(
                helped.insert(name.to_string(), ()).is_none(),
                "HELP twice: {line}"
            );
            ensure!(!types.contains_key(name), "HELP after TYPE: {line}");
            current = Some(name.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let Some((name, kind)) = rest.split_once(' ') else {
                return Err(format!("TYPE without a type: {line}"));
            };
            ensure!(
                current.as_deref() == Some(name),
                "TYPE not right after its HELP: {line}"
            );
            ensure!(matches!(kind, "counter" | "gauge"), "{line}");
            ensure!(
                (kind == "counter") == name.ends_with("_total"),
                "counters and only counters end in _total: {line}"
            );
            ensure!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "TYPE twice: {line}"
            );
        } else {
            ensure!(!line.starts_with('#'), "another comment: {line}");
            let Some(end) = line.find(['{', ' ']) else {
                return Err(format!("no value: {line}"));
            };
            let name = &line[..end];
            ensure!(metric_name_ok(name), "{line}");
            ensure!(
                current.as_deref() == Some(name) && types.contains_key(name),
                "not under its own HELP and TYPE: {line}"
            );
            let (mut labels, rest) = if line[end..].starts_with('{') {
                parse_labels(&line[end..], line)?
            } else {
                (Vec::new(), line[end..].to_string())
            };
            let Some(value) = rest.strip_prefix(' ') else {
                return Err(format!("not one space before the value: {line}"));
            };
            ensure!(!value.contains(' '), "a timestamp or more: {line}");
            let Ok(value) = value.parse::<f64>() else {
                return Err(format!("not a number: {line}"));
            };
            labels.sort();
            let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            let series = if inner.is_empty() {
                name.to_string()
            } else {
                format!("{name}{{{}}}", inner.join(","))
            };
            ensure!(
                samples.insert(series, value).is_none(),
                "series twice: {line}"
            );
        }
    }
    Ok(Scrape { samples, types })
}

fn parse_prometheus(text: &str) -> Scrape {
    try_parse_prometheus(text).unwrap_or_else(|why| panic!("{why}\n{text}"))
}

#[test]
fn the_strict_parser_refuses_what_the_format_does_not_allow() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\\\"\"} 3\n";
    assert_eq!(parse_prometheus(good).value("a_total{x=\"1\\\"\"}"), 3.0);
    for bad in [
        "a 1\n",
        "# HELP a A.\n# TYPE a counter\na 1\n",
        "# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n",
        "# TYPE a gauge\n# HELP a A.\na 1\n",
        "# HELP a A.\n# TYPE a gauge\na{x=\"1} 1\n",
        "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} one\n",
        "# HELP a A.\n# TYPE a gauge\na 1\na 2\n",
        "# HELP a A.\n# TYPE a gauge\na 1",
    ] {
        assert!(try_parse_prometheus(bad).is_err(), "{bad:?} passed");
    }
}

/// Scrapes `/metrics` every 100 ms until two scrapes in a row agree (what the last program
/// left has settled); that scrape.
fn settled(url: &str) -> Scrape {
    let scrape = || {
        let (status, text) = get(&format!("{url}metrics"));
        assert_eq!(status, 200, "{text}");
        parse_prometheus(&text)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = scrape();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = scrape();
        if now == last {
            return now;
        }
        assert!(Instant::now() < deadline, "the figures never settled");
        last = now;
    }
}

#[test]
fn metrics_parse_strictly_grow_with_traffic_and_equal_cluster_stats_at_the_same_moment() {
    let d = dir("web-metrics");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/nvme.c"));
    let (live, url) = up_with_web(&d, "back-to-back");
    let before = settled(&url);
    assert_eq!(before.types["smartio_accesses_total"], "counter");
    assert_eq!(before.types["smartio_adapter_lut_entries_used"], "gauge");
    // Traffic: an NVMe borrowed from C, written and read back through the NTBs.
    let said = succeeded(&finish(
        live.program("borrower", &exe, &["16"]).spawn().unwrap(),
        LIMIT,
    ));
    assert!(said.contains("every byte matches"), "{said}");
    let after = settled(&url);
    for (series, value) in &before.samples {
        let name = series.split('{').next().unwrap_or_default();
        if before.types[name] == "counter" {
            assert!(after.value(series) >= *value, "{series} went down");
        }
    }
    assert!(after.value("smartio_accesses_total") > before.value("smartio_accesses_total"));
    let carried = |s: &Scrape| -> f64 {
        s.samples
            .iter()
            .filter(|(k, _)| k.starts_with("smartio_link_bytes_total{"))
            .map(|(_, v)| v)
            .sum()
    };
    assert!(
        carried(&after) >= f64::from(128u32 * 512),
        "128 blocks each way"
    );
    // Quiet now: `cluster stats --json` and a scrape straight after say the same.
    let sock = live.sock.to_str().expect("a UTF-8 path");
    let (ok, json, err) = common::smartio(&["cluster", "stats", "--socket", sock, "--json"]);
    assert!(ok, "{err}");
    let now = parse_prometheus(&get(&format!("{url}metrics")).1);
    assert_eq!(now, after, "nothing moved between the two reads");
    let v = common::json(&json);
    let n = |v: &serde_json::Value| v.as_u64().expect("a count") as f64;
    assert_eq!(now.value("smartio_accesses_total"), n(&v["accesses"]));
    assert_eq!(now.value("smartio_segments"), n(&v["segments"]));
    assert_eq!(
        now.value("smartio_descriptors{scenario=\"back-to-back\"}"),
        n(&v["descriptors"])
    );
    for a in v["adapters"].as_array().expect("adapters") {
        let labels = format!(
            "{{adapter={:?},host={:?},node_id=\"{}\"}}",
            a["adapter"].as_str().unwrap_or_default(),
            a["host"].as_str().unwrap_or_default(),
            a["node_id"]
        );
        for (metric, field) in [
            ("smartio_adapter_lut_entries_used", "lut_used"),
            ("smartio_adapter_lut_entries", "lut_entries"),
            ("smartio_adapter_requester_ids_used", "requester_ids_used"),
            ("smartio_adapter_requester_ids", "requester_ids"),
        ] {
            assert_eq!(
                now.value(&format!("{metric}{labels}")),
                n(&a[field]),
                "{metric}"
            );
        }
    }
    let links = v["links"].as_array().expect("links");
    assert!(!links.is_empty());
    for l in links {
        let link = l["link"].as_str().unwrap_or_default();
        for way in ["down", "up"] {
            let labels = format!("{{direction=\"{way}\",link={link:?}}}");
            assert_eq!(
                now.value(&format!("smartio_link_accesses_total{labels}")),
                n(&l[way]["accesses"])
            );
            assert_eq!(
                now.value(&format!("smartio_link_bytes_total{labels}")),
                n(&l[way]["bytes"])
            );
        }
    }
    for dev in v["devices"].as_array().expect("devices") {
        let labels = format!(
            "{{device={:?},fdid=\"{}\",kind={:?}}}",
            dev["device"].as_str().unwrap_or_default(),
            dev["fdid"],
            dev["kind"].as_str().unwrap_or_default()
        );
        let borrowers = dev["borrowers"].as_array().map_or(0, Vec::len) as f64;
        assert_eq!(
            now.value(&format!("smartio_device_borrowers{labels}")),
            borrowers
        );
    }
    // Anything but the three pages is not there.
    assert_eq!(get(&format!("{url}nothing")).0, 404);
}

#[test]
fn the_readmes_web_script_serves_the_page_and_metrics() {
    if !common::live::runs("curl") {
        assert!(
            std::env::var_os("SMARTIO_REQUIRE_BROWSER").is_none(),
            "no curl"
        );
        eprintln!("SKIPPED: no curl (apt-get install curl)");
        return;
    }
    let d = dir("web-readme");
    let port = free_port();
    let path = common::path_with_smartio(&d);
    let out = finish(
        Command::new("bash")
            .args(["-euo", "pipefail", "-c"])
            .arg(readme_script("# web-view"))
            .current_dir(&d)
            .env("PATH", path)
            .env("SOCK", d.join("cluster.sock"))
            .env("WEB", format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let said = succeeded(&out);
    assert!(said.contains("live view at http://127.0.0.1:"), "{said}");
    assert!(
        said.contains("smartio_adapter_lut_entries_used{adapter=\"lender.ntb0\""),
        "{said}"
    );
}

#[test]
fn a_web_address_in_use_is_refused_before_the_cluster_is_built() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("bound").to_string();
    let d = dir("web-in-use");
    let sock = d.join("c.sock");
    let started = Instant::now();
    let (ok, _, err) = common::smartio(&[
        "cluster",
        "up",
        "--scenario",
        "back-to-back",
        "--socket",
        sock.to_str().expect("UTF-8"),
        "--web",
        &addr,
    ]);
    assert!(!ok);
    assert!(
        err.contains(&format!("--web {addr}: cannot listen there")),
        "{err}"
    );
    assert!(!sock.exists(), "no daemon was started");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A TCP port free on loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

// ---------------------------------------------------------------------------------------
// The page in a real browser.

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Whether the browser and its driver are installed (a panic where CI requires them).
fn browser() -> bool {
    if Path::new(CHROMIUM).is_file() && Path::new(CHROMEDRIVER).is_file() {
        return true;
    }
    assert!(
        std::env::var_os("SMARTIO_REQUIRE_BROWSER").is_none(),
        "no {CHROMIUM} or {CHROMEDRIVER}"
    );
    eprintln!("SKIPPED: no headless browser (apt-get install chromium chromium-driver)");
    false
}

/// chromedriver on a port of its own, with one browser session; both ended when dropped.
struct Browser {
    driver: Child,
    base: String,
    session: String,
}

impl Browser {
    fn start(dir: &Path) -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = agent()
                .get(&format!("{base}/status"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok())
                .is_some_and(|b| b.contains("\"ready\":true"));
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver never got ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = dir.join("chromium-profile");
        let capabilities = serde_json::json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": CHROMIUM,
                    "args": [
                        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        format!("--user-data-dir={}", profile.display()),
                        "--window-size=1400,1200",
                    ]
                }
            }}
        });
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
        };
        let answer = browser.call("POST", "/session", &capabilities);
        browser.session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_string();
        browser
    }

    /// A WebDriver command; its `value`.
    fn call(&self, method: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
        let url = format!("{}{path}", self.base);
        let a = agent();
        let response = match method {
            "POST" => a
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body.to_string()),
            "DELETE" => a.delete(&url).call(),
            _ => a.get(&url).call(),
        };
        let mut response = response.expect("chromedriver answers");
        let text = response.body_mut().read_to_string().expect("a body");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert!(
            v["value"].get("error").is_none(),
            "{method} {path}: {}",
            v["value"]
        );
        v["value"].clone()
    }

    fn open(&self, url: &str) {
        self.call(
            "POST",
            &format!("/session/{}/url", self.session),
            &serde_json::json!({ "url": url }),
        );
    }

    /// Runs `script` in the page; what it returns.
    fn run(&self, script: &str) -> serde_json::Value {
        self.call(
            "POST",
            &format!("/session/{}/execute/sync", self.session),
            &serde_json::json!({ "script": script, "args": [] }),
        )
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let url = format!("{}/session/{}", self.base, self.session);
            let _ = agent().delete(&url).call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// What the page shows, read from its DOM: its update number and state, lender:nvme0's
/// borrowers in the table, whether the picture has an arrow from it to the host `borrower`,
/// whether segment 42 of `borrower` is listed, and lender.ntb0's look-up-table entries used.
const READ_PAGE: &str = r#"
const q = (s) => document.querySelector(s);
const row = q('#devices tr[data-device="lender:nvme0"]');
const lut = q('#adapters tr[data-adapter="lender.ntb0"]');
return {
  version: Number(q('#version').textContent),
  status: q('#status').textContent,
  borrowers: row ? row.dataset.borrowers : null,
  arrow: !!q('#picture path.borrow[data-device="lender:nvme0"][data-borrower="borrower"][marker-end]'),
  segment: !!q('#segments tr[data-owner="borrower"][data-id="42"]'),
  lut: lut ? Number(lut.dataset.lut) : null,
  not_counted: q('#not-counted').textContent,
};
"#;

/// Reads the page until `wanted` holds, for at most `limit` from `since`; how long it took
/// from `since`, and the page's last reading.
fn until(
    browser: &Browser,
    since: Instant,
    limit: Duration,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> (Duration, serde_json::Value) {
    loop {
        let page = browser.run(READ_PAGE);
        let took = since.elapsed();
        if wanted(&page) {
            return (took, page);
        }
        assert!(
            took < limit,
            "the page did not follow within {limit:?}: {page}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads a program's standard output until a line contains `wanted`.
fn read_line_with(child: &mut Child, wanted: &str) -> String {
    let stdout = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout);
    let mut seen = String::new();
    while !seen.contains(wanted) {
        let mut line = String::new();
        assert!(
            lines.read_line(&mut line).expect("reads") > 0,
            "the program ended before {wanted:?}:\n{seen}"
        );
        seen.push_str(&line);
    }
    child.stdout = Some(lines.into_inner());
    seen
}

#[test]
fn the_page_in_a_headless_browser_follows_a_c_programs_borrow_within_a_second() {
    if !browser() {
        return;
    }
    let d = dir("web-browser");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe: PathBuf = sdk.build(&repo("crates/cli/tests/sisci/watched.c"));
    let (live, url) = up_with_web(&d, "back-to-back");
    let (status, page) = get(&url);
    assert_eq!(status, 200);
    eprintln!("the page: {} bytes", page.len());
    let browser = Browser::start(&d);
    browser.open(&url);
    // Live (its event stream open), nothing borrowed, and what is not counted said.
    let (_, first) = until(&browser, Instant::now(), Duration::from_secs(10), |p| {
        p["status"] == "live"
    });
    assert_eq!(first["borrowers"], "", "{first}");
    assert_eq!(
        (first["arrow"].as_bool(), first["segment"].as_bool()),
        (Some(false), Some(false))
    );
    assert!(
        first["not_counted"]
            .as_str()
            .is_some_and(|t| t.contains("CPU loads and stores into mapped segments")),
        "{first}"
    );
    let lut_before = first["lut"].as_u64().expect("lender.ntb0 listed");
    // A C program borrows lender:nvme0 (fdid 1), makes segment 42 and maps it for the device.
    let mut program = live
        .program("borrower", &exe, &["1"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    read_line_with(&mut program, "done");
    let done = Instant::now();
    let (took, now) = until(&browser, done, Duration::from_secs(1), |p| {
        p["version"].as_u64() > first["version"].as_u64()
            && p["borrowers"] == "borrower"
            && p["arrow"] == true
            && p["segment"] == true
            && p["lut"].as_u64() > Some(lut_before)
    });
    assert_eq!(now["status"], "live", "{now}");
    eprintln!("C program done -> page updated: {} ms", took.as_millis());
    // It gives everything back when its input closes: the page follows that too.
    drop(program.stdin.take());
    let said = succeeded(&finish(program, LIMIT));
    assert!(said.contains("everything given back"), "{said}");
    let back = Instant::now();
    let (took_back, _) = until(&browser, back, Duration::from_secs(1), |p| {
        p["version"].as_u64() > now["version"].as_u64()
            && p["borrowers"] == ""
            && p["arrow"] == false
            && p["segment"] == false
            && p["lut"].as_u64() == Some(lut_before)
    });
    eprintln!(
        "C program exited -> page updated: {} ms",
        took_back.as_millis()
    );
    // The daemon goes down: the page says it is disconnected instead of showing old state.
    let down = Instant::now();
    drop(live);
    let (took_down, gone) = until(&browser, down, Duration::from_secs(5), |p| {
        p["status"] != "live"
    });
    assert_eq!(gone["status"], "disconnected", "{gone}");
    eprintln!(
        "cluster down -> page disconnected: {} ms",
        took_down.as_millis()
    );
    let _ = std::io::stdout().flush();
}
