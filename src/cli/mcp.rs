//! `keet mcp`: a Model Context Protocol server on standard input/output, for coding agents
//! (Claude Code, Codex, Cursor, a local agent on a GPU node). Built on the official Rust SDK
//! (`rmcp`) with its stdio transport only: the server opens no network socket.
//!
//! Tools: `explain`, `inspect`, `compare`, `history`, `show`, `what_to_collect`. Each calls the
//! same library functions as the command of that name. What goes wrong with the input (a file
//! that is not a profile, a report cut off mid-write, no model installed) comes back as a tool
//! error carrying keet's message; what is wrong with the request itself (an unknown tool, an
//! argument of the wrong type, a path that does not exist) is a protocol error (invalid params).
//! Either way the server keeps serving.
//!
//! The server reads only the paths it is given (resolved to absolute paths and checked before
//! any work) and writes nothing but its analysis cache (`--no-cache`: nothing at all). The model
//! is loaded only by an `explain` or `compare` call that needs it; `no_llm` calls never load it.

use crate::analysis::{self, InspectDocument, LaunchAnalysis};
use crate::compare::{self, CompareOptions};
use crate::explain::{self, ExplainOptions, ReportSettings, RunOptions};
use crate::llm::engine::EngineOptions;
use crate::render;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ErrorData, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, Clone)]
pub struct McpArgs {
    /// Cache file for `explain` (and `history`/`show`) (default: keet's cache dir).
    #[arg(long, env = "KEET_CACHE")]
    pub cache: Option<PathBuf>,
    /// Neither read nor write the analysis cache: the server writes nothing at all.
    #[arg(long)]
    pub no_cache: bool,
    /// Default model for `explain`/`compare` calls that name none (a .gguf file, a model folder
    /// or a manifest name; default: KEET_MODEL, then the installed default).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// cpu (default), cuda or cuda:N.
    #[arg(long)]
    pub device: Option<String>,
    /// CPU threads for the model.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// How a server instructs its client (sent once at initialisation).
const INSTRUCTIONS: &str = "keet explains NVIDIA Nsight Compute profiles (.ncu-rep files, ncu CSV exports, or folders of them) \
offline: the regime of each kernel that takes the time, the cause with the largest share, bounded estimates, and what to change. \
Start with `explain` (no_llm=true answers in milliseconds with the rule layer's validated report); use `inspect` for one \
kernel's facts and raw metrics, `edit` for one checked change to a kernel's source, `compare` for before/after profiles of a change, `what_to_collect` for the ncu command \
that collects what a profile lacks, `history`/`show` for past analyses. Paths are on the machine running keet.";

/// Launches listed by one `inspect` call at most (the rest are counted; narrow with `kernel`).
const INSPECT_MAX_LAUNCHES: usize = 20;
/// Raw metrics per launch on one `inspect` page, unless the call asks for another page size.
const DEFAULT_METRICS_PAGE: usize = 200;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExplainParams {
    /// Profiles to explain: `.ncu-rep` files, ncu CSV exports, or folders (searched recursively).
    pub paths: Vec<String>,
    /// Explain at most this many kernels (default 10).
    #[serde(default)]
    pub top: Option<usize>,
    /// Explain the kernels that make up this percentage of the profiled time (default 95).
    #[serde(default)]
    pub coverage: Option<f64>,
    /// Fit the text report into this many tokens (counted with the model's tokenizer); the least
    /// important kernels are cut first. Default: no limit.
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// Model to write the explanations: a .gguf file, a model folder, or a manifest name
    /// (default: the server's `--model`, then KEET_MODEL, then the installed default).
    #[serde(default)]
    pub model: Option<String>,
    /// The rule layer's report alone, no model: answers in milliseconds (default false).
    #[serde(default)]
    pub no_llm: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditParams {
    /// One profile: a `.ncu-rep` file or an ncu CSV export.
    pub path: String,
    /// The kernel: text its (demangled) name contains, case-insensitive. Default: the kernel that
    /// takes the most time.
    #[serde(default)]
    pub kernel: Option<String>,
    /// The kernel's source: a file or a folder. Default: the sources the report embeds
    /// (`ncu --import-source yes`).
    #[serde(default)]
    pub source: Option<String>,
    /// Model to write the edit (default: the server's `--model`, then KEET_MODEL, then the installed default).
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InspectParams {
    /// One profile: a `.ncu-rep` file, an ncu CSV export, or a folder (searched recursively).
    pub path: String,
    /// Only launches whose kernel name (demangled or mangled) contains this text, case-insensitive;
    /// a number selects the launch with that id.
    #[serde(default)]
    pub kernel: Option<String>,
    /// Also list every raw metric of each launch, sorted by name, one page at a time (default false).
    #[serde(default)]
    pub all_metrics: Option<bool>,
    /// With all_metrics: the first metric of the page (default 0; the answer gives the next offset).
    #[serde(default)]
    pub metrics_offset: Option<usize>,
    /// With all_metrics: metrics per launch on this page (default 200).
    #[serde(default)]
    pub metrics_limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompareParams {
    /// The baseline profile: a `.ncu-rep` file, an ncu CSV export, or a folder.
    pub before: String,
    /// The profile after the change, same kinds as `before`.
    pub after: String,
    /// Fail (a tool error listing the kernels) when a matched kernel's total time grew by more
    /// than this percentage.
    #[serde(default)]
    pub fail_on_regression: Option<f64>,
    /// Deltas only, no model (default true: the deltas answer in milliseconds; false asks the
    /// model to explain what changed).
    #[serde(default)]
    pub no_llm: Option<bool>,
    /// Model for the explanation of what changed (see `explain`).
    #[serde(default)]
    pub model: Option<String>,
    /// Fit the text report into this many tokens; the smallest changes are cut first.
    #[serde(default)]
    pub max_tokens: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HistoryParams {
    /// Only analyses whose file, kernel, model or verdict contains this text (case-insensitive).
    #[serde(default)]
    pub filter: Option<String>,
    /// At most this many analyses, newest first (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShowParams {
    /// The analysis id (the `id` of a `history` row, or `cache_id` in an explain report).
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WhatToCollectParams {
    /// The profile: a `.ncu-rep` file, an ncu CSV export, or a folder.
    pub path: String,
    /// Only kernels whose name contains this text (case-insensitive); default: the kernels that
    /// take the most time (up to 10).
    #[serde(default)]
    pub kernel: Option<String>,
    /// The application and its arguments as you run it (put at the end of the ncu command).
    #[serde(default)]
    pub application: Option<String>,
}

/// The server: its settings and the tool router.
#[derive(Clone)]
pub struct KeetServer {
    settings: McpArgs,
    tool_router: ToolRouter<Self>,
}

/// A tool error carrying keet's message (the input was read and found wanting).
fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A result with `text` for the model to read and `structured` JSON for programs.
fn answer(text: String, structured: Value, is_error: bool) -> CallToolResult {
    let mut r = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    r.structured_content = Some(structured);
    r
}

/// `path` made absolute and checked: it must exist and be a readable file or folder. Not so is
/// a bad argument (a protocol error naming the path).
pub fn checked_path(path: &str) -> Result<PathBuf, ErrorData> {
    if path.trim().is_empty() {
        return Err(ErrorData::invalid_params("empty path", None));
    }
    let p = Path::new(path);
    let absolute = std::fs::canonicalize(p).map_err(|e| {
        ErrorData::invalid_params(
            format!("{path}: {e} (expected a .ncu-rep file, an ncu CSV export or a folder)"),
            Some(json!({ "path": path })),
        )
    })?;
    let meta =
        std::fs::metadata(&absolute).map_err(|e| ErrorData::invalid_params(format!("{path}: {e}"), Some(json!({ "path": path }))))?;
    let readable = if meta.is_dir() { std::fs::read_dir(&absolute).map(|_| ()) } else { std::fs::File::open(&absolute).map(|_| ()) };
    readable.map_err(|e| ErrorData::invalid_params(format!("{path}: cannot read: {e}"), Some(json!({ "path": path }))))?;
    if !meta.is_dir() && !meta.is_file() {
        return Err(ErrorData::invalid_params(format!("{path}: not a file or a folder"), Some(json!({ "path": path }))));
    }
    Ok(absolute)
}

/// Runs blocking work (parsing, the model) off the protocol loop.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ErrorData> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ErrorData::internal_error(format!("keet stopped in the middle of the call: {e}"), None))
}

/// Does launch `l` match the `kernel` filter (see [`InspectParams::kernel`])?
fn kernel_matches(l: &LaunchAnalysis, filter: &str) -> bool {
    let f = filter.trim().to_lowercase();
    if let Ok(id) = f.parse::<u64>() {
        if l.id == id {
            return true;
        }
    }
    l.name.to_lowercase().contains(&f) || l.mangled_name.as_deref().is_some_and(|m| m.to_lowercase().contains(&f))
}

/// The kernel names in `doc` (each once, in launch order), for an error that lists what there is.
fn kernel_names(doc: &InspectDocument) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for l in doc.files.iter().flat_map(|f| &f.launches) {
        if !names.contains(&l.name) {
            names.push(l.name.clone());
        }
    }
    names
}

fn no_kernel_matches(filter: &str, doc: &InspectDocument) -> CallToolResult {
    let names = kernel_names(doc);
    let shown: Vec<&str> = names.iter().take(10).map(String::as_str).collect();
    let more = names.len().saturating_sub(shown.len());
    tool_error(format!(
        "no launch's kernel matches {filter:?}; the profile has: {}{}",
        shown.join("; "),
        if more > 0 { format!(" (and {more} more)") } else { String::new() }
    ))
}

/// The errors of a run, one "error: ..." line each.
fn error_lines<'a>(messages: impl Iterator<Item = &'a str>) -> String {
    messages.map(|m| format!("error: {m}\n")).collect()
}

impl KeetServer {
    fn engine(&self, model: Option<String>) -> EngineOptions {
        EngineOptions {
            model: model.or_else(|| self.settings.model.clone()),
            device: self.settings.device.clone(),
            threads: self.settings.threads,
        }
    }

    fn cache_path(&self) -> Option<PathBuf> {
        (!self.settings.no_cache)
            .then(|| self.settings.cache.clone().filter(|p| !p.as_os_str().is_empty()).unwrap_or_else(crate::cache::default_cache_path))
    }
}

#[tool_router(router = tool_router)]
impl KeetServer {
    pub fn new(settings: McpArgs) -> Self {
        Self { settings, tool_router: Self::tool_router() }
    }

    /// Explains why the kernels that take the time are slow and what to change.
    #[tool(
        name = "explain",
        description = "Explain an Nsight Compute profile: for each kernel that takes the time, the regime (throughput-bound on a unit, latency-, grid- or launch-bound), the cause with the largest share with a physics-bounded estimate, the evidence (raw metric values), hot source lines and the changes to try. Text: compact Markdown made for a model's context (fit to max_tokens when given). Structured content: the full JSON report (schema keet.explain/2). no_llm=true: the rule layer's report alone, in milliseconds; otherwise a local model writes the sentences, validated against the metrics (loaded on first use; tens of seconds per kernel on CPU).",
        annotations(title = "Explain a profile", read_only_hint = true, open_world_hint = false)
    )]
    async fn explain(&self, Parameters(p): Parameters<ExplainParams>) -> Result<CallToolResult, ErrorData> {
        if p.paths.is_empty() {
            return Err(ErrorData::invalid_params("paths: give at least one profile or folder", None));
        }
        let paths = p.paths.iter().map(|s| checked_path(s)).collect::<Result<Vec<_>, _>>()?;
        if let Some(c) = p.coverage.filter(|c| !c.is_finite() || !(0.0..=100.0).contains(c)) {
            return Err(ErrorData::invalid_params(format!("coverage: a percentage from 0 to 100, not {c}"), None));
        }
        let opts = ExplainOptions {
            settings: ReportSettings {
                coverage_pct: p.coverage.unwrap_or(95.0),
                top: p.top.unwrap_or(10).max(1),
                max_findings: 2,
                no_llm: p.no_llm.unwrap_or(false),
                repair_attempts: 1,
                source_files: vec![],
                shard: None,
                prose: explain::ProseMode::default(),
                edit: true,
                ..ReportSettings::default()
            },
            // A tool call answers per kernel; the caller summarises.
            summary: false,
            sets: None,
            model_ranks: None,
            run: RunOptions {
                engine: self.engine(p.model),
                cache: self.cache_path(),
                refresh: false,
                jobs: 0,
                progress: false,
                concurrency: 1,
                ..RunOptions::default()
            },
        };
        let max_tokens = p.max_tokens;
        blocking(move || {
            let counter = match max_tokens {
                Some(n) => match crate::cli::token_counter(opts.run.engine.model.as_deref()) {
                    Ok(c) => Some((n, c)),
                    Err(e) => return tool_error(format!("max_tokens: {e:#}")),
                },
                None => None,
            };
            let (mut report, _stats) = match explain::explain(&paths, &opts) {
                Ok(r) => r,
                Err(e) => return tool_error(format!("{:#}", anyhow::Error::from(e))),
            };
            report.hide_dropped_text();
            let errors = error_lines(report.errors.iter().map(|e| e.message.as_str()));
            if report.kernels.is_empty() {
                let msg = if errors.is_empty() { "no kernel launches found in the inputs\n".to_string() } else { errors };
                return tool_error(msg.trim_end());
            }
            let budget = counter.as_ref().map(|(n, count)| render::context::TokenBudget { max_tokens: *n, count: count.as_ref() });
            let text = match render::context::explain_context(&report, budget.as_ref()) {
                Ok(t) => t,
                Err(e) => return tool_error(e.to_string()),
            };
            let structured = serde_json::to_value(&report).unwrap_or(Value::Null);
            answer(format!("{errors}{text}"), structured, !report.errors.is_empty())
        })
        .await
    }

    /// One checked code edit for a kernel's first finding that can be fixed in its code.
    #[tool(
        name = "edit",
        description = "Propose one checked edit of a kernel's source for the first problem of its profile that can be fixed in code. keet finds the kernel's definition (in the sources the report embeds, `ncu --import-source yes`, or in `source`), a local model writes the edit and ties the problem to the construct that causes it, and keet checks the edit before it is returned: the lines exist in the kernel (or its launch site for a launch-shape fix), the file still parses, it uses only names that exist or that it declares, keeps the kernel's inputs, and it is the kind of change that fixes that problem. Text: the explanation and a unified diff, or why no edit is given. Structured content: {kernel, code} with before/after lines, the kinds of change and the checks (schema keet.explain/2, `code_section`). Tens of seconds to minutes on CPU.",
        annotations(title = "Propose a checked code edit", read_only_hint = true, open_world_hint = false)
    )]
    async fn edit(&self, Parameters(p): Parameters<EditParams>) -> Result<CallToolResult, ErrorData> {
        let path = checked_path(&p.path)?;
        let source = p.source.as_deref().map(checked_path).transpose()?;
        let base = ExplainOptions {
            settings: ReportSettings {
                coverage_pct: 100.0,
                top: 10_000,
                no_llm: true,
                source_files: source.into_iter().collect(),
                ..ReportSettings::default()
            },
            summary: false,
            run: RunOptions { engine: self.engine(p.model), cache: self.cache_path(), ..RunOptions::default() },
            ..ExplainOptions::default()
        };
        let filter = p.kernel.map(|k| k.to_lowercase());
        blocking(move || {
            let inputs = vec![path];
            let rules = match explain::explain(&inputs, &base) {
                Ok((r, _)) => r,
                Err(e) => return tool_error(format!("{:#}", anyhow::Error::from(e))),
            };
            let wanted = rules.kernels.iter().find(|k| filter.as_deref().is_none_or(|f| k.kernel.name.to_lowercase().contains(f)));
            let Some(rank) = wanted.map(|k| k.rank) else {
                let names: Vec<&str> = rules.kernels.iter().map(|k| k.kernel.name.as_str()).take(20).collect();
                return tool_error(format!("no kernel matches {:?}; kernels: {}", filter.unwrap_or_default(), names.join(", ")));
            };
            let opts = ExplainOptions {
                settings: ReportSettings { no_llm: false, ..base.settings.clone() },
                model_ranks: Some(vec![rank]),
                ..base
            };
            let report = match explain::explain(&inputs, &opts) {
                Ok((r, _)) => r,
                Err(e) => return tool_error(format!("{:#}", anyhow::Error::from(e))),
            };
            let Some(k) = report.kernels.iter().find(|k| k.rank == rank) else { return tool_error("the kernel was not explained") };
            let text = edit_text(&k.kernel.name, k.code.as_ref());
            answer(text, json!({ "kernel": k.kernel.name, "code": k.code }), false)
        })
        .await
    }

    /// The facts, rule findings and ncu's own rules for each launch of one profile.
    #[tool(
        name = "inspect",
        description = "Inspect one profile launch by launch: identity and launch shape, derived facts (each with the raw metrics it comes from), keet's rule findings, the diagnosis (regime, what the profile is missing and the ncu option that collects it) and Nsight Compute's own rule results. `kernel` narrows to matching launches (at most 20 launches per answer). all_metrics=true adds each launch's raw metrics sorted by name, one page at a time (metrics_offset, metrics_limit; the answer says the next offset). Text: Markdown; structured content: JSON (schema keet.inspect/1). A report cut off mid-write gives its complete launches and a tool error naming the byte where it ends.",
        annotations(title = "Inspect a profile", read_only_hint = true, open_world_hint = false)
    )]
    async fn inspect(&self, Parameters(p): Parameters<InspectParams>) -> Result<CallToolResult, ErrorData> {
        let path = checked_path(&p.path)?;
        let all_metrics = p.all_metrics.unwrap_or(false);
        let offset = p.metrics_offset.unwrap_or(0);
        let limit = p.metrics_limit.unwrap_or(DEFAULT_METRICS_PAGE).max(1);
        blocking(move || {
            let files = match crate::profile::expand_inputs(std::slice::from_ref(&path)) {
                Ok(f) if f.is_empty() => return tool_error(format!("no .ncu-rep or .csv files found in {}", path.display())),
                Ok(f) => f,
                Err(e) => return tool_error(format!("listing {}: {e}", path.display())),
            };
            let mut doc = match analysis::inspect_files(&files, 0, all_metrics) {
                Ok(d) => d,
                Err(e) => return tool_error(format!("thread pool: {e}")),
            };
            if let Some(filter) = p.kernel.as_deref().filter(|k| !k.trim().is_empty()) {
                let all = doc.clone();
                for f in &mut doc.files {
                    f.launches.retain(|l| kernel_matches(l, filter));
                }
                doc.files.retain(|f| !f.launches.is_empty());
                if doc.files.is_empty() && doc.errors.is_empty() {
                    return no_kernel_matches(filter, &all);
                }
            }
            // At most INSPECT_MAX_LAUNCHES launches, in file and launch order.
            let total_launches: usize = doc.files.iter().map(|f| f.launches.len()).sum();
            let mut room = INSPECT_MAX_LAUNCHES;
            for f in &mut doc.files {
                f.launches.truncate(room);
                room -= f.launches.len();
            }
            doc.files.retain(|f| !f.launches.is_empty());
            // One page of metrics per launch.
            let mut next_offset: Option<usize> = None;
            let mut metric_totals: Vec<usize> = Vec::new();
            for l in doc.files.iter_mut().flat_map(|f| f.launches.iter_mut()) {
                if let Some(rows) = l.metrics.take() {
                    metric_totals.push(rows.len());
                    if offset + limit < rows.len() {
                        next_offset = Some(offset + limit);
                    }
                    l.metrics = Some(rows.into_iter().skip(offset).take(limit).collect());
                }
            }
            let mut text = error_lines(doc.errors.iter().map(|e| e.message.as_str()));
            match render::render("inspect.md", &super::inspect::template_context(&doc)) {
                Ok(t) => text.push_str(&t),
                Err(e) => return tool_error(e.to_string()),
            }
            if all_metrics {
                text.push_str(&super::inspect::metrics_tables(&doc, true));
                let most = metric_totals.iter().copied().max().unwrap_or(0);
                text.push_str(&match next_offset {
                    Some(n) => format!(
                        "\n(metrics {offset}..{n} of up to {most} per launch; call again with metrics_offset={n} for the next page)\n"
                    ),
                    None => format!("\n(metrics from {offset}: the last page; {most} at most per launch)\n"),
                });
            }
            let shown: usize = doc.files.iter().map(|f| f.launches.len()).sum();
            if shown < total_launches {
                text.push_str(&format!("\n({} more launch(es) not shown; narrow with `kernel`)\n", total_launches - shown));
            }
            let mut structured = serde_json::to_value(&doc).unwrap_or(Value::Null);
            structured["launches_total"] = json!(total_launches);
            if all_metrics {
                structured["metrics_page"] = json!({ "offset": offset, "limit": limit, "next_offset": next_offset });
            }
            answer(text, structured, !doc.errors.is_empty())
        })
        .await
    }

    /// Matched kernels and deltas between two profiles.
    #[tool(
        name = "compare",
        description = "Compare two profiles (before and after a change): kernels matched by name and launch shape, their time and the facts that changed (throughput of each unit, occupancy, stalls), kernels only on one side, and shape changes. fail_on_regression=PCT makes a kernel whose total time grew by more than PCT percent a tool error naming it (a CI-style gate). no_llm defaults to true (deltas in milliseconds); no_llm=false asks the local model to explain what changed, validated against both profiles. Text: compact Markdown; structured content: JSON (schema keet.compare/1).",
        annotations(title = "Compare two profiles", read_only_hint = true, open_world_hint = false)
    )]
    async fn compare(&self, Parameters(p): Parameters<CompareParams>) -> Result<CallToolResult, ErrorData> {
        let before = checked_path(&p.before)?;
        let after = checked_path(&p.after)?;
        if let Some(pct) = p.fail_on_regression.filter(|x| !x.is_finite() || *x < 0.0) {
            return Err(ErrorData::invalid_params(format!("fail_on_regression: a percentage >= 0, not {pct}"), None));
        }
        let opts = CompareOptions { top: 3, no_llm: p.no_llm.unwrap_or(true), engine: self.engine(p.model), jobs: 0, matches: vec![] };
        let max_tokens = p.max_tokens;
        let threshold = p.fail_on_regression;
        blocking(move || {
            let counter = match max_tokens {
                Some(n) => match crate::cli::token_counter(opts.engine.model.as_deref()) {
                    Ok(c) => Some((n, c)),
                    Err(e) => return tool_error(format!("max_tokens: {e:#}")),
                },
                None => None,
            };
            let mut report = match compare::compare(&before, &after, &opts) {
                Ok(r) => r,
                Err(e @ compare::CompareError::Llm(_)) => return tool_error(format!("{e} (call with no_llm=true for the deltas alone)")),
                Err(e) => return tool_error(format!("{:#}", anyhow::Error::from(e))),
            };
            let mut head = error_lines(report.errors.iter().map(|e| e.message.as_str()));
            if report.before.launches == 0 || report.after.launches == 0 {
                let side = if report.before.launches == 0 { &before } else { &after };
                head.push_str(&format!("error: no kernel launches found in {}", side.display()));
                return tool_error(head.trim_end());
            }
            if let Some(pct) = threshold {
                report.check_regressions(pct);
                for r in &report.regressions {
                    head.push_str(&format!(
                        "regression: {} total time {} -> {} (+{}%, threshold {}%)\n",
                        r.name,
                        crate::format::duration(r.before_ns),
                        crate::format::duration(r.after_ns),
                        crate::rules::fmt_num(r.delta_pct),
                        crate::rules::fmt_num(pct)
                    ));
                }
            }
            let budget = counter.as_ref().map(|(n, count)| render::context::TokenBudget { max_tokens: *n, count: count.as_ref() });
            let text = match render::context::compare_context(&report, budget.as_ref()) {
                Ok(t) => t,
                Err(e) => return tool_error(e.to_string()),
            };
            let failed = !report.errors.is_empty() || !report.regressions.is_empty();
            answer(format!("{head}{text}"), serde_json::to_value(&report).unwrap_or(Value::Null), failed)
        })
        .await
    }

    /// Past analyses in the cache.
    #[tool(
        name = "history",
        description = "List past analyses kept in keet's cache, newest first: id, date, model, verdict, kernel, file. `filter` keeps rows whose file, kernel, model or verdict contains the text. Pass an id to `show` for the whole analysis. Reads the cache only (never creates it).",
        annotations(title = "Past analyses", read_only_hint = true, open_world_hint = false)
    )]
    async fn history(&self, Parameters(p): Parameters<HistoryParams>) -> Result<CallToolResult, ErrorData> {
        let Some(path) = self.cache_path() else {
            return Ok(tool_error("the server runs with --no-cache: there is no history"));
        };
        let limit = match p.limit {
            Some(0) => None,
            Some(n) => Some(n),
            None => Some(20),
        };
        blocking(move || {
            let cache = match crate::cache::Cache::open_existing(&path) {
                Ok(c) => c,
                Err(e) => return tool_error(e.to_string()),
            };
            let rows = match &cache {
                Some(c) => match c.history(limit, p.filter.as_deref()) {
                    Ok(r) => r,
                    Err(e) => return tool_error(e.to_string()),
                },
                None => vec![],
            };
            let text = if cache.is_none() {
                format!("No analyses yet ({} does not exist).\n", path.display())
            } else if rows.is_empty() {
                format!("No analyses{} in {}.\n", p.filter.as_deref().map(|f| format!(" match {f:?}")).unwrap_or_default(), path.display())
            } else {
                super::history::history_table(&rows)
            };
            answer(text, json!({ "schema": super::history::HISTORY_SCHEMA, "cache": path, "analyses": rows }), false)
        })
        .await
    }

    /// One past analysis from the cache.
    #[tool(
        name = "show",
        description = "Show one past analysis from keet's cache by id (see `history`), without the profile or the model: text the Markdown report as `keet show -f md` prints it, structured content the stored JSON report (schema keet.explain/2) marked as cached.",
        annotations(title = "Show a past analysis", read_only_hint = true, open_world_hint = false)
    )]
    async fn show(&self, Parameters(p): Parameters<ShowParams>) -> Result<CallToolResult, ErrorData> {
        let Some(path) = self.cache_path() else {
            return Ok(tool_error("the server runs with --no-cache: there are no past analyses"));
        };
        blocking(move || {
            let cache = match crate::cache::Cache::open_existing(&path) {
                Ok(Some(c)) => c,
                Ok(None) => {
                    return tool_error(format!("no analysis with id {} ({} does not exist; call explain first)", p.id, path.display()))
                }
                Err(e) => return tool_error(e.to_string()),
            };
            let entry = match cache.show(p.id) {
                Ok(Some(e)) => e,
                Ok(None) => return tool_error(format!("no analysis with id {} in {} (see history)", p.id, path.display())),
                Err(e) => return tool_error(e.to_string()),
            };
            let mut report: Value = match serde_json::from_str(&entry.report_json) {
                Ok(v) => v,
                Err(e) => return tool_error(format!("cache {}: analysis {} holds an unreadable report: {e}", path.display(), p.id)),
            };
            super::history::mark_cached(&mut report, entry.id);
            // Rendered as `keet show -f md` renders it (the stored JSON when no template fits).
            let text = match super::history::render_stored("explain.md", &report) {
                Ok(t) => t,
                Err(e) => return tool_error(format!("{e:#}")),
            };
            answer(text, report, false)
        })
        .await
    }

    /// The ncu command line that collects what the profile lacks.
    #[tool(
        name = "what_to_collect",
        description = "What a profile lacks for a kernel and the ncu command line that collects it: the sections keet's diagnosis needs (speed of light, warp stalls, occupancy, launch statistics, memory tables, source counters) that are not in the profile, as one `ncu --section ... --kernel-name ... --launch-count 1 -o ...` command for that kernel, plus steps outside ncu (compile with -lineinfo). `application` is put at the end of the command. Structured content: per kernel, {kernel, missing: [{what, ncu_option}], command, notes}.",
        annotations(title = "What to collect next", read_only_hint = true, open_world_hint = false)
    )]
    async fn what_to_collect(&self, Parameters(p): Parameters<WhatToCollectParams>) -> Result<CallToolResult, ErrorData> {
        let path = checked_path(&p.path)?;
        blocking(move || {
            let files = match crate::profile::expand_inputs(std::slice::from_ref(&path)) {
                Ok(f) if f.is_empty() => return tool_error(format!("no .ncu-rep or .csv files found in {}", path.display())),
                Ok(f) => f,
                Err(e) => return tool_error(format!("listing {}: {e}", path.display())),
            };
            let doc = match analysis::inspect_files(&files, 0, false) {
                Ok(d) => d,
                Err(e) => return tool_error(format!("thread pool: {e}")),
            };
            // One launch per kernel name (the first), kernels ordered by total time.
            let mut kernels: Vec<(&LaunchAnalysis, f64)> = Vec::new();
            for l in doc.files.iter().flat_map(|f| &f.launches) {
                if p.kernel.as_deref().is_some_and(|k| !kernel_matches(l, k)) {
                    continue;
                }
                let t = l.duration_ns.unwrap_or(0.0);
                match kernels.iter_mut().find(|(k, _)| k.name == l.name) {
                    Some((_, total)) => *total += t,
                    None => kernels.push((l, t)),
                }
            }
            if kernels.is_empty() {
                if let Some(k) = &p.kernel {
                    if doc.errors.is_empty() {
                        return no_kernel_matches(k, &doc);
                    }
                }
                let errors = error_lines(doc.errors.iter().map(|e| e.message.as_str()));
                return tool_error(if errors.is_empty() {
                    "no kernel launches found in the profile".to_string()
                } else {
                    errors.trim_end().to_string()
                });
            }
            kernels.sort_by(|a, b| b.1.total_cmp(&a.1));
            let more = kernels.len().saturating_sub(10);
            kernels.truncate(10);
            let plans: Vec<crate::collect::CollectPlan> =
                kernels.iter().map(|(l, _)| crate::collect::plan(l, p.application.as_deref(), "keet-more")).collect();
            let mut text = error_lines(doc.errors.iter().map(|e| e.message.as_str()));
            for plan in &plans {
                text.push_str(&format!("## {}\n", plan.kernel));
                match &plan.command {
                    None => text.push_str("Nothing keet uses is missing for this kernel.\n\n"),
                    Some(cmd) => {
                        for m in &plan.missing {
                            text.push_str(&format!("- missing: {} (`{}`)\n", m.what, m.ncu_option));
                        }
                        for n in &plan.notes {
                            text.push_str(&format!("- also: {n}\n"));
                        }
                        text.push_str(&format!("\n```sh\n{cmd}\n```\n\n"));
                    }
                }
            }
            if more > 0 {
                text.push_str(&format!("({more} more kernel(s) not shown; name one with `kernel`)\n"));
            }
            answer(text, json!({ "kernels": plans, "errors": doc.errors }), !doc.errors.is_empty())
        })
        .await
    }
}

/// The `edit` tool's text: the edit with its explanation and diff, or why there is none.
fn edit_text(kernel: &str, code: Option<&explain::report::CodeSection>) -> String {
    let Some(code) = code else { return format!("`{kernel}`: keet did not look for its code.\n") };
    let mut out = match &code.kernel {
        Some(k) => format!("`{kernel}`: {}:{}-{}, `{}`\n", k.path, k.start_line, k.end_line, k.name),
        None => format!("`{kernel}`: code not found: {}\n", code.missing.as_deref().unwrap_or("?")),
    };
    match (&code.edit, &code.no_edit) {
        (Some(e), _) => out.push_str(&format!(
            "\nEdit for {} ({}): {}\n\n```diff\n{}```\n",
            e.category.as_str(),
            e.kinds.join(", "),
            e.explanation,
            e.unified_diff
        )),
        (None, Some(why)) => out.push_str(&format!("\nNo edit: {why}\n")),
        (None, None) => {}
    }
    out
}

/// The arguments of a call to `tool`, checked against the tool's parameter type before it runs:
/// an unknown tool or arguments that do not fit (a wrong type, a missing field) are a protocol
/// error (invalid params) naming the tool. (rmcp itself reports arguments that do not fit as a
/// tool error.)
fn check_arguments(tool: &str, arguments: Option<&rmcp::model::JsonObject>) -> Result<(), ErrorData> {
    fn fits<T: serde::de::DeserializeOwned>(tool: &str, args: Value) -> Result<(), ErrorData> {
        serde_json::from_value::<T>(args)
            .map(|_| ())
            .map_err(|e| ErrorData::invalid_params(format!("{tool}: wrong arguments: {e} (see the tool's input schema)"), None))
    }
    let args = Value::Object(arguments.cloned().unwrap_or_default());
    match tool {
        "explain" => fits::<ExplainParams>(tool, args),
        "edit" => fits::<EditParams>(tool, args),
        "inspect" => fits::<InspectParams>(tool, args),
        "compare" => fits::<CompareParams>(tool, args),
        "history" => fits::<HistoryParams>(tool, args),
        "show" => fits::<ShowParams>(tool, args),
        "what_to_collect" => fits::<WhatToCollectParams>(tool, args),
        _ => Err(ErrorData::invalid_params(
            format!("unknown tool {tool:?}; keet's tools: explain, edit, inspect, compare, history, show, what_to_collect"),
            None,
        )),
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KeetServer {
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        check_arguments(&request.name, request.arguments.as_ref())?;
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("keet", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// Serves MCP on standard input/output until the client closes the connection.
pub fn run(a: McpArgs) -> anyhow::Result<i32> {
    use anyhow::Context;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the MCP server's runtime")?;
    runtime.block_on(async move {
        let server = KeetServer::new(a);
        let running = server.serve((tokio::io::stdin(), tokio::io::stdout())).await.context("MCP initialisation over stdio")?;
        running.waiting().await.context("MCP server")?;
        anyhow::Ok(())
    })?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_routed_tool_has_its_arguments_checked() {
        let tools = KeetServer::tool_router().list_all();
        assert_eq!(tools.len(), 7);
        for t in &tools {
            // An empty call is either accepted or refused for its fields, never as an unknown tool.
            if let Err(e) = check_arguments(&t.name, None) {
                assert!(e.message.contains("wrong arguments"), "{}: {}", t.name, e.message);
            }
        }
        let e = check_arguments("explain", Some(&serde_json::from_value(json!({"paths": ["a"], "top": "ten"})).unwrap())).unwrap_err();
        assert!(e.message.contains("invalid type: string \"ten\""), "{}", e.message);
        assert!(check_arguments("nope", None).unwrap_err().message.contains("unknown tool \"nope\""));
    }

    #[test]
    fn paths_are_checked_before_any_work() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.csv");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(checked_path(file.to_str().unwrap()).unwrap(), std::fs::canonicalize(&file).unwrap());
        assert!(checked_path(dir.path().to_str().unwrap()).is_ok());
        let missing = dir.path().join("missing.ncu-rep");
        let e = checked_path(missing.to_str().unwrap()).unwrap_err();
        assert!(e.message.contains("missing.ncu-rep") && e.message.contains("No such file"), "{}", e.message);
        assert!(checked_path(" ").is_err());
    }
}
