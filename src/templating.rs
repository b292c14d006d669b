//! The minijinja environments keet renders with, made in one place:
//! - the prompt environment, for the model's prompts in `prompts/` (explain, code edits, the
//!   profile summary, compare);
//! - the report environment, with the report templates in `src/render/templates/` and every filter
//!   they use;
//! - the expert environment, for the words of the rule findings in `expert/findings.toml`
//!   (strict: a variable a template names but the rule does not give is an error).
//!
//! Low in the module graph: it imports only [`crate::format`], no stage.

use crate::format;
use minijinja::{Environment, UndefinedBehavior};

/// The report templates by name (`explain.txt`, ...), embedded at build time.
pub const REPORT_TEMPLATES: &[(&str, &str)] = &[
    ("inspect.txt", include_str!("render/templates/inspect.txt.jinja")),
    ("inspect.md", include_str!("render/templates/inspect.md.jinja")),
    ("explain.txt", include_str!("render/templates/explain.txt.jinja")),
    ("explain.md", include_str!("render/templates/explain.md.jinja")),
    ("explain.html", include_str!("render/templates/explain.html.jinja")),
    ("compare.txt", include_str!("render/templates/compare.txt.jinja")),
    ("compare.md", include_str!("render/templates/compare.md.jinja")),
    ("eval.txt", include_str!("render/templates/eval.txt.jinja")),
    ("eval.md", include_str!("render/templates/eval.md.jinja")),
    ("eval-states.txt", include_str!("render/templates/eval-states.txt.jinja")),
    ("explain.context", include_str!("render/templates/explain.context.jinja")),
    ("compare.context", include_str!("render/templates/compare.context.jinja")),
    ("sets.txt", include_str!("render/templates/sets.txt.jinja")),
    ("sets-detail.txt", include_str!("render/templates/sets-detail.txt.jinja")),
    ("sets.md", include_str!("render/templates/sets.md.jinja")),
    ("sets.html", include_str!("render/templates/sets.html.jinja")),
];

/// Block tags take their line with them: a `{% ... %}` alone on a line leaves no blank line and
/// no indentation behind.
fn line_blocks(env: &mut Environment<'static>) {
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
}

/// The environment the model's prompts are rendered in (`render_str` with the template's text).
pub fn prompt_environment() -> Environment<'static> {
    let mut env = Environment::new();
    line_blocks(&mut env);
    env
}

/// The environment of the report templates ([`REPORT_TEMPLATES`]) with their filters: `num`
/// (numbers as reports show them), `dur` (nanoseconds as a duration), `si` (SI-prefixed number),
/// `pad(n)` / `rpad(n)` (left- / right-align in n columns), `trunc(n)` (one line, at most n
/// characters), `basename`, `oneline`, `wrap(width, indent)` (word-wrap, continuation lines
/// indented), `mdcell` (text safe inside a Markdown table cell), `mdcode` (text for a code span),
/// `origin` (the finding origin marker: `rules`, `model`, `model, repaired`) and `pctw` (a
/// percentage clamped to 0..100 for bar widths).
pub fn report_environment() -> Environment<'static> {
    let mut env = Environment::new();
    line_blocks(&mut env);
    for (name, source) in REPORT_TEMPLATES {
        env.add_template(name, source).expect("embedded templates are valid (checked by tests)");
    }
    env.add_filter("num", |x: f64| format::number(x));
    env.add_filter("dur", |ns: f64| format::duration(ns));
    env.add_filter("si", |x: f64| format::si(x));
    env.add_filter("pad", |text: String, width: usize| format!("{text:<width$}"));
    env.add_filter("rpad", |text: String, width: usize| format!("{text:>width$}"));
    env.add_filter("trunc", |text: String, max_chars: usize| {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.chars().count() > max_chars {
            format!("{}...", text.chars().take(max_chars).collect::<String>())
        } else {
            text
        }
    });
    env.add_filter("distinct", |labels: Vec<String>, min_width: usize, max_width: usize| {
        format::distinct_column(&labels, min_width, max_width)
    });
    env.add_filter("basename", |path: String| {
        std::path::Path::new(&path).file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or(path)
    });
    env.add_filter("oneline", |text: String| text.split_whitespace().collect::<Vec<_>>().join(" "));
    env.add_filter("wrap", |text: String, width: usize, indent: usize| format::wrap(&text, width, indent));
    env.add_filter("mdcell", |text: String| format::md_cell(&text));
    env.add_filter("mdcode", |text: String| format::md_code(&text));
    env.add_filter("origin", |origin: String| format::origin_label(&origin).to_string());
    env.add_filter("pctw", |pct: f64| if pct.is_finite() { format!("{:.2}", pct.clamp(0.0, 100.0)) } else { "0".into() });
    env
}

/// The environment of the rule findings' words (`expert/findings.toml`): strict about undefined
/// variables, with the `num` filter; block tags keep their whitespace (the texts are one line).
pub fn expert_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.add_filter("num", |x: f64| format::number(x));
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    #[test]
    fn report_templates_compile_and_html_autoescapes() {
        let env = report_environment();
        for (name, _) in REPORT_TEMPLATES {
            env.get_template(name).unwrap();
        }
        let page = env.template_from_named_str("x.html", "{{ s }}").unwrap();
        assert_eq!(page.render(context! { s => "<&>" }).unwrap(), "&lt;&amp;&gt;");
    }

    #[test]
    fn prompt_blocks_take_their_line() {
        let text = prompt_environment().render_str("a\n  {% if x %}\nb\n  {% endif %}\nc", context! { x => true }).unwrap();
        assert_eq!(text, "a\nb\nc");
    }

    #[test]
    fn expert_words_are_strict() {
        assert!(expert_environment().render_str("{{ missing|num }}", context! {}).is_err());
        assert_eq!(expert_environment().render_str("{{ x|num }}", context! { x => 64.54 }).unwrap(), "64.5");
    }
}
