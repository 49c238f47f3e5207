//! The self-contained HTML page of `smartio repro --html`: the verdicts, each figure's
//! plots as inline SVG, a picture of each scenario the figures ran on (`topo --svg`'s), and
//! the calibration the run used.

use super::figure::Outcome;
use crate::error::CliError;
// One escape for the page and the pictures in it: XML's is also HTML's.
use crate::picture::svg::escape;

/// The anchor of a scenario's picture.
fn anchor(scenario: &str) -> String {
    let safe: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("scenario-{safe}")
}

/// The page; `scenarios` are the scenarios run, each with its picture (an `<svg>` element)
/// or why there is none.
pub(super) fn page(
    outcomes: &[Outcome],
    scenarios: &[(String, Result<String, impl std::fmt::Display>)],
    calibration: &str,
) -> Result<String, CliError> {
    let holding = outcomes.iter().filter(|o| o.finding.holds).count();
    let mut s = String::new();
    s.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>smartio repro</title><style>\
         body{font-family:sans-serif;max-width:72em;margin:2em auto;padding:0 1em}\
         table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .5em;\
         vertical-align:top}.holds{color:#060;font-weight:bold}\
         .fails{color:#a00;font-weight:bold}svg{max-width:100%;height:auto}\
         pre{white-space:pre-wrap;font-size:.8em}</style></head><body>\n",
    );
    s.push_str(&format!(
        "<h1>smartio: the papers' figures on the emulator</h1>\n<p>{holding} of {} \
         statements hold. Each verdict is computed from the measurement by the rule shown.</p>\n",
        outcomes.len()
    ));
    if !scenarios.is_empty() {
        let links: Vec<String> = scenarios
            .iter()
            .map(|(name, _)| format!("<a href=\"#{}\">{}</a>", anchor(name), escape(name)))
            .collect();
        s.push_str(&format!(
            "<p>Scenarios run (each drawn <a href=\"#scenarios\">below</a>): {}.</p>\n",
            links.join(", ")
        ));
    }
    s.push_str(
        "<table><tr><th>figure</th><th>verdict</th><th>the paper</th><th>the emulator</th>\
         <th>rule</th></tr>\n",
    );
    for o in outcomes {
        let (class, verdict) = if o.finding.holds {
            ("holds", "holds")
        } else {
            ("fails", "FAILS")
        };
        s.push_str(&format!(
            "<tr><td><a href=\"#{id}\">{id}</a><br>{paper}</td><td class=\"{class}\">{verdict}\
             </td><td>{claim}<br><small>{source}</small></td><td>{measured}</td>\
             <td>{rule}</td></tr>\n",
            id = escape(o.id),
            paper = escape(o.paper),
            claim = escape(o.claim),
            source = escape(o.source),
            measured = match o.fitted {
                Some(f) => format!(
                    "{}<br><small>fitted: {}</small>",
                    escape(&o.finding.measured),
                    escape(f)
                ),
                None => escape(&o.finding.measured),
            },
            rule = escape(&o.finding.rule),
        ));
    }
    s.push_str("</table>\n");
    for o in outcomes.iter().filter(|o| !o.finding.plots.is_empty()) {
        s.push_str(&format!(
            "<h2 id=\"{}\">{} — {}</h2>\n",
            escape(o.id),
            escape(o.id),
            escape(o.paper)
        ));
        for p in &o.finding.plots {
            s.push_str(&p.svg()?);
            s.push('\n');
        }
    }
    if !scenarios.is_empty() {
        s.push_str(
            "<h2 id=\"scenarios\">Scenarios</h2>\n<p>Each scenario the figures ran on, as \
             <code>smartio topo --scenario NAME --svg FILE</code> draws it.</p>\n",
        );
        for (name, picture) in scenarios {
            s.push_str(&format!(
                "<h3 id=\"{}\">{}</h3>\n",
                anchor(name),
                escape(name)
            ));
            match picture {
                Ok(svg) => s.push_str(svg),
                Err(why) => {
                    s.push_str(&format!("<p>Not drawn: {}</p>\n", escape(&why.to_string())))
                }
            }
        }
    }
    s.push_str(&format!(
        "<h2>Calibration</h2>\n<details><summary>the calibration this run used</summary>\
         <pre>{}</pre></details>\n</body></html>\n",
        escape(calibration)
    ));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    #[test]
    fn each_scenario_is_linked_and_drawn_or_says_why_not() {
        let scenarios = vec![
            (
                "back-to-back".to_string(),
                Ok("<svg class=\"topology\"></svg>".to_string()),
            ),
            ("odd <name>".to_string(), Err("no such <file>".to_string())),
        ];
        let page = page(&[], &scenarios, "").expect("a page");
        assert!(page.contains("<a href=\"#scenario-back-to-back\">back-to-back</a>"));
        assert!(page.contains("<h3 id=\"scenario-back-to-back\">back-to-back</h3>\n<svg"));
        assert!(page.contains("<h3 id=\"scenario-odd__name_\">odd &lt;name&gt;</h3>"));
        assert!(page.contains("<p>Not drawn: no such &lt;file&gt;</p>"));
    }
}
