//! Rendering: turns analyses into terminal text, Markdown, JSON or HTML with minijinja templates
//! (embedded in the binary from `src/render/templates/`).

use minijinja::{Environment, Value};
use serde::Serialize;

pub mod context;
pub mod explain;
pub mod explain_view;
pub mod roofline;
pub mod set_context;
pub mod sets_plot;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Md,
    Json,
    Html,
    /// Compact Markdown for an LLM's context window (`--max-tokens` budgets it).
    Context,
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("template {name}: {source}")]
    Template {
        name: String,
        #[source]
        source: minijinja::Error,
    },
    #[error("--max-tokens {max_tokens} is below the smallest report: its first line alone is {needed} tokens")]
    Budget { max_tokens: usize, needed: usize },
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

const TEMPLATES: &[(&str, &str)] = &[
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
    ("sets.md", include_str!("render/templates/sets.md.jinja")),
    ("sets.html", include_str!("render/templates/sets.html.jinja")),
];

/// The template environment with keet's filters: `num` (numbers as reports show them), `dur`
/// (nanoseconds as a human duration), `pad(n)` (left-align in n columns).
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    for (name, src) in TEMPLATES {
        env.add_template(name, src).expect("embedded templates are valid (checked by tests)");
    }
    env.add_filter("num", |x: f64| crate::rules::fmt_num(x));
    env.add_filter("dur", |ns: f64| human_duration(ns));
    env.add_filter("pad", |s: String, n: usize| format!("{s:<n$}"));
    env.add_filter("trunc", |s: String, n: usize| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if s.chars().count() > n {
            format!("{}...", s.chars().take(n).collect::<String>())
        } else {
            s
        }
    });
    env.add_filter("basename", |s: String| std::path::Path::new(&s).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or(s));
    env.add_filter("oneline", |s: String| s.split_whitespace().collect::<Vec<_>>().join(" "));
    env.add_filter("rpad", |s: String, n: usize| format!("{s:>n$}"));
    env
}

/// 1952 -> "1.95 us"; 10776576 -> "10.78 ms".
pub fn human_duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Renders `data` with the named template (`inspect.txt`, ...).
pub fn render<T: Serialize>(template: &str, data: &T) -> Result<String, RenderError> {
    let env = environment();
    let tmpl = env.get_template(template).map_err(|source| RenderError::Template { name: template.into(), source })?;
    tmpl.render(Value::from_serialize(data)).map_err(|source| RenderError::Template { name: template.into(), source })
}

/// Pretty JSON with a trailing newline.
pub fn json<T: Serialize>(data: &T) -> Result<String, RenderError> {
    let mut s = serde_json::to_string_pretty(data)?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_compile() {
        let env = environment();
        for (name, _) in TEMPLATES {
            env.get_template(name).unwrap();
        }
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(1952.0), "1.95 us");
        assert_eq!(human_duration(10_776_576.0), "10.78 ms");
        assert_eq!(human_duration(12.0), "12 ns");
    }
}
