//! Name templates of repeated hosts: `node{i:02}` with `repeat = [0, 59]` names `node00` to
//! `node59`; `sub{i/10}` in a `connect` picks one sub-switch per ten hosts.

use super::limits::MAX_TEMPLATE_WIDTH;

/// Replaces `{i}`, `{i:02}`, `{i/10}` and `{i/10:02}` in `template` for index `i`. Widths
/// are at most [`MAX_TEMPLATE_WIDTH`] (an index has at most 10 digits); anything else in braces
/// is an error naming the template and the allowed forms.
pub fn expand_template(template: &str, i: u32) -> Result<String, String> {
    const FORMS: &str = "{i}, {i:02} or {i/10}";
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{template:?}: unclosed '{{' (use {FORMS})"))?;
        let field = &after[..end];
        let (expr, width) = match field.split_once(':') {
            Some((e, w)) => {
                let width = w.parse::<usize>().ok().filter(|&w| w <= MAX_TEMPLATE_WIDTH);
                let width = width.ok_or_else(|| {
                    format!(
                        "{template:?}: width {w:?} in {{{field}}} is not a number from 0 to \
                         {MAX_TEMPLATE_WIDTH} (allowed: {FORMS})"
                    )
                })?;
                (e, width)
            }
            None => (field, 0),
        };
        let value = match expr.split_once('/') {
            None if expr == "i" => i,
            Some(("i", d)) => {
                let d: u32 = d.parse().ok().filter(|&d| d > 0).ok_or_else(|| {
                    format!(
                        "{template:?}: divisor {d:?} in {{{field}}} is not a whole number from \
                         1 to {} (allowed: {FORMS})",
                        u32::MAX
                    )
                })?;
                i / d
            }
            _ => {
                return Err(format!(
                    "{template:?}: unknown placeholder {{{field}}} (allowed: {FORMS})"
                ))
            }
        };
        out.push_str(&format!("{value:0width$}"));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_index_width_and_division() {
        assert_eq!(
            expand_template("n{i:03}-s{i/10}", 42).as_deref(),
            Ok("n042-s4")
        );
        assert_eq!(
            expand_template("n{i:10}", u32::MAX).as_deref(),
            Ok("n4294967295")
        );
        assert_eq!(expand_template("n{i/10:02}", 7).as_deref(), Ok("n00"));
    }

    #[test]
    fn a_huge_width_is_an_error_not_a_panic_or_an_allocation() {
        let err = expand_template("n{i:99999999}", 1).expect_err("too wide");
        assert_eq!(
            err,
            "\"n{i:99999999}\": width \"99999999\" in {i:99999999} is not a number from 0 to 10 \
             (allowed: {i}, {i:02} or {i/10})"
        );
        let err = expand_template("n{i:99999999999999999999999}", 1).expect_err("no usize");
        assert!(err.contains("is not a number from 0 to 10"), "{err}");
    }

    #[test]
    fn unknown_fields_divisors_and_unclosed_braces_are_named() {
        for (template, needle) in [
            ("n{j}", "unknown placeholder {j}"),
            ("n{i*2}", "unknown placeholder {i*2}"),
            ("n{}", "unknown placeholder {}"),
            ("n{i/0}", "divisor \"0\""),
            ("n{i/-1}", "divisor \"-1\""),
            ("n{i", "unclosed '{'"),
        ] {
            let err = expand_template(template, 1).expect_err(template);
            assert!(err.contains(needle), "{template}: {err}");
            assert!(err.contains(&format!("{template:?}")), "{template}: {err}");
        }
    }
}
