//! `GET /`: one self-contained page (`page.html`: inline CSS and script, the picture an
//! inline `<svg>`, no other request but its event stream) holding the latest update, which
//! its script draws into tables and then follows on `/events?picture=N` (N: the picture it
//! has, so the stream sends the picture only when it changes). It says what the figures
//! leave out ([`NOT_COUNTED`]) and shows whether what it shows is live, stale or
//! disconnected.

use super::watch::Update;
use crate::picture::svg::escape;
use serde::Serialize;
use smartio_live::stats::{ClusterStats, NOT_COUNTED};

const TEMPLATE: &str = include_str!("page.html");

/// An update as the page's script takes it (the initial one and each event).
#[derive(Serialize)]
struct Wire<'a> {
    version: u64,
    polls: u64,
    at_ms: u64,
    stats: Option<&'a ClusterStats>,
    error: Option<&'a str>,
    picture_version: u64,
    /// Only when the receiver's is older.
    #[serde(skip_serializing_if = "Option::is_none")]
    picture: Option<&'a str>,
}

/// `u` as JSON, with the picture if `with_picture`. Safe inside a `<script>` element: `<`
/// is written `\u003c` (it only occurs in strings).
pub fn update_json(u: &Update, with_picture: bool) -> String {
    let wire = Wire {
        version: u.version,
        polls: u.polls,
        at_ms: u.at_ms,
        stats: u.stats.as_ref(),
        error: u.error.as_deref(),
        picture_version: u.picture_version,
        picture: with_picture.then_some(u.picture.as_str()),
    };
    serde_json::to_string(&wire)
        .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
        .replace('<', "\\u003c")
}

/// The page, as of `u`.
pub fn render(u: &Update) -> String {
    let scenario = u.stats.as_ref().map_or("", |s| s.scenario.as_str());
    TEMPLATE
        .replace("{{SCENARIO}}", &escape(scenario))
        .replace("{{NOT_COUNTED}}", &escape(NOT_COUNTED))
        .replace("{{PICTURE}}", &u.picture)
        .replace("{{INITIAL}}", &update_json(u, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_page_carries_the_update_and_says_what_is_not_counted_with_nothing_external() {
        let u = Update {
            version: 3,
            picture: Arc::new("<svg class=\"topology\"></svg>".into()),
            picture_version: 1,
            error: Some("a </script> in an error".into()),
            ..Update::default()
        };
        let page = render(&u);
        assert!(page.contains(&escape(NOT_COUNTED)), "{page}");
        assert!(!page.contains("{{"), "every placeholder filled");
        assert!(!page.contains("a </script>"), "no early end of the script");
        let initial = page
            .split("<script type=\"application/json\" id=\"initial\">")
            .nth(1)
            .and_then(|rest| rest.split("</script>").next())
            .expect("the initial update");
        let v: serde_json::Value = serde_json::from_str(initial).expect("JSON");
        assert_eq!(v["version"], 3);
        assert_eq!(
            (v["picture_version"].as_u64(), v.get("picture")),
            (Some(1), None)
        );
        assert!(page.contains("<div id=\"picture\"><svg class=\"topology\"></svg></div>"));
        assert_eq!(v["error"], "a </script> in an error");
        for external in ["src=", "href=", "@import", "url(http"] {
            assert!(!page.contains(external), "{external}");
        }
    }
}
