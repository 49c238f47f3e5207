//! Name templates of repeated hosts: `node{i:02}` with `repeat = [0, 59]` names `node00` to
//! `node59`; `sub{i/10}` in a `connect` picks one sub-switch per ten hosts.

use super::limits::MAX_TEMPLATE_WIDTH;
use thiserror::Error;

/// The placeholders a template may hold, as every [`TemplateError`] lists them.
const FORMS: &str = "{i}, {i:02} or {i/10}";

/// Why a name template cannot be expanded; every message quotes the template.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TemplateError {
    /// A `{` without its `}`.
    #[error("{template:?}: unclosed '{{' (use {FORMS})")]
    Unclosed {
        /// The template.
        template: String,
    },
    /// A width that is not a number up to [`MAX_TEMPLATE_WIDTH`].
    #[error("{template:?}: width {width:?} in {{{field}}} is not a number from 0 to {MAX_TEMPLATE_WIDTH} (allowed: {FORMS})")]
    BadWidth {
        /// The template.
        template: String,
        /// The width as written.
        width: String,
        /// The placeholder, without braces.
        field: String,
    },
    /// A divisor that is not a whole number from 1.
    #[error("{template:?}: divisor {divisor:?} in {{{field}}} is not a whole number from 1 to {max} (allowed: {FORMS})", max = u32::MAX)]
    BadDivisor {
        /// The template.
        template: String,
        /// The divisor as written.
        divisor: String,
        /// The placeholder, without braces.
        field: String,
    },
    /// Anything else in braces.
    #[error("{template:?}: unknown placeholder {{{field}}} (allowed: {FORMS})")]
    UnknownPlaceholder {
        /// The template.
        template: String,
        /// The placeholder, without braces.
        field: String,
    },
}

/// Replaces `{i}`, `{i:02}`, `{i/10}` and `{i/10:02}` in `template` for index `i`. Widths
/// are at most [`MAX_TEMPLATE_WIDTH`] (an index has at most 10 digits); anything else in braces
/// is an error naming the template and the allowed forms.
pub fn expand_template(template: &str, i: u32) -> Result<String, TemplateError> {
    let owned = || template.to_string();
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after
            .find('}')
            .ok_or_else(|| TemplateError::Unclosed { template: owned() })?;
        let field = &after[..end];
        let (expr, width) = match field.split_once(':') {
            Some((e, w)) => {
                let width = w.parse::<usize>().ok().filter(|&w| w <= MAX_TEMPLATE_WIDTH);
                let width = width.ok_or_else(|| TemplateError::BadWidth {
                    template: owned(),
                    width: w.to_string(),
                    field: field.to_string(),
                })?;
                (e, width)
            }
            None => (field, 0),
        };
        let value =
            match expr.split_once('/') {
                None if expr == "i" => i,
                Some(("i", d)) => {
                    let d: u32 = d.parse().ok().filter(|&d| d > 0).ok_or_else(|| {
                        TemplateError::BadDivisor {
                            template: owned(),
                            divisor: d.to_string(),
                            field: field.to_string(),
                        }
                    })?;
                    i / d
                }
                _ => {
                    return Err(TemplateError::UnknownPlaceholder {
                        template: owned(),
                        field: field.to_string(),
                    })
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
            TemplateError::BadWidth {
                template: "n{i:99999999}".into(),
                width: "99999999".into(),
                field: "i:99999999".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "\"n{i:99999999}\": width \"99999999\" in {i:99999999} is not a number from 0 to 10 \
             (allowed: {i}, {i:02} or {i/10})"
        );
        let err = expand_template("n{i:99999999999999999999999}", 1)
            .expect_err("no usize")
            .to_string();
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
            let err = expand_template(template, 1)
                .expect_err(template)
                .to_string();
            assert!(err.contains(needle), "{template}: {err}");
            assert!(err.contains(&format!("{template:?}")), "{template}: {err}");
        }
    }
}
