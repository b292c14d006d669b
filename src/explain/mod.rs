//! Explain stage: selects the kernels worth explaining, renders their prompts, asks the model for
//! findings under a per-kernel JSON Schema, validates them, and assembles the report.
//!
//! Flow per kernel: facts and rule findings ([`crate::analysis`]) → prompt (`prompts/*.jinja`) and
//! schema ([`schema`]) → constrained generation ([`crate::llm`]) → [`crate::validate`] → repaired
//! (one bounded, constrained re-ask with the reasons) or dropped → every sentence through the
//! [`crate::prose`] gate (a failing sentence gets one constrained re-ask with the gate's reasons, then
//! the expert text stands instead) → rule findings fill the gaps.
//! Every analysis is stored in the [`crate::cache`]; a warm run never loads the model.

pub mod code;
mod concurrent;
pub mod prompt;
pub mod report;
pub mod schema;
pub mod select;
pub mod source;
pub mod summary;

use crate::analysis::{self, FileError, LaunchAnalysis};
use crate::llm::engine::{Engine, EngineOptions, GenerateOptions};
use crate::llm::template::ChatMessage;
use crate::llm::Generate;
use crate::profile::{Launch, Profile};
use crate::prose::Field;
use crate::rules;
use crate::validate::{self, Context};
use report::*;
use std::path::PathBuf;
use std::time::Instant;

/// How to explain.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// Explain the launches that make up this share of the profiled time (percent).
    pub coverage_pct: f64,
    /// At most this many kernels.
    pub top: usize,
    /// At most this many model findings per kernel.
    pub max_findings: usize,
    /// Rule layer only: no model is loaded.
    pub no_llm: bool,
    /// Constrained re-asks for a finding that fails validation.
    pub repair_attempts: usize,
    pub engine: EngineOptions,
    /// `None`: no cache (`--no-cache`).
    pub cache: Option<PathBuf>,
    /// Recompute and replace cached analyses.
    pub refresh: bool,
    /// Parallel parse/facts threads (0 = all cores).
    pub jobs: usize,
    /// `--source FILE.cu` files whose lines findings may point at.
    pub source_files: Vec<PathBuf>,
    /// Show progress on stderr (only when it is a terminal).
    pub progress: bool,
    /// `(k, n)`: only the input files whose index (in sorted order) is `k` modulo `n` (Slurm job arrays).
    pub shard: Option<(usize, usize)>,
    /// How the model writes its sentences.
    pub prose: ProseMode,
    /// Ask the model for a summary of the whole report (with at least two kernels explained).
    pub summary: bool,
    /// Only the kernels of these ranks (1-based) go to the model; the others keep the rule layer's
    /// findings and are not cached. `None`: every chosen kernel (`keet eval` asks only about some).
    pub model_ranks: Option<Vec<usize>>,
    /// Look for each explained kernel's code and, with a model, ask for one checked edit of it.
    pub edit: bool,
    /// Kernels asked about at once: their answers are decoded together, one forward pass stepping
    /// all of them (the report is the same for any value; 1 asks one after another).
    pub concurrency: usize,
}

pub use crate::report::batch::ProseMode;

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            coverage_pct: 95.0,
            top: 10,
            max_findings: 1,
            no_llm: false,
            repair_attempts: 1,
            engine: EngineOptions::default(),
            cache: None,
            refresh: false,
            jobs: 0,
            source_files: vec![],
            progress: false,
            shard: None,
            prose: ProseMode::default(),
            summary: true,
            model_ranks: None,
            edit: true,
            concurrency: 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("model: {0}")]
    // No `#[source]`: the message already carries the model error (a chain would print it twice).
    Llm(crate::llm::model::LlmError),
    #[error("cache: {0}")]
    Cache(#[from] crate::cache::CacheError),
    #[error("prompt template: {0}")]
    Prompt(#[from] minijinja::Error),
    #[error("{0}")]
    Io(String),
}

impl From<crate::llm::model::LlmError> for ExplainError {
    fn from(e: crate::llm::model::LlmError) -> Self {
        ExplainError::Llm(e)
    }
}

/// Decoding settings used for findings (part of the cache key).
pub fn decoding() -> GenerateOptions {
    GenerateOptions { repeat_penalty: 1.15, ..GenerateOptions::default() }
}

/// Timing of one run, for the benchmark.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunStats {
    pub parse_s: f64,
    pub model_load_s: f64,
    pub first_finding_s: Option<f64>,
    pub kernels_explained: usize,
    pub kernels_from_cache: usize,
    pub llm_findings_shown: usize,
    pub llm_findings_repaired: usize,
    pub llm_findings_dropped: usize,
    /// Model sentences shown / re-asked / replaced by expert text.
    pub prose: ProseCounts,
    /// Shown model sentences with a number that is not one of the kernel's rendered values (audit; 0 expected).
    pub shown_ungrounded: usize,
    /// Shown model sentences the prose gate flags when checked again on their own (audit; 0 expected).
    pub shown_gate_flagged: usize,
    /// Seconds spent generating (model calls only).
    pub generate_s: f64,
    /// Kernels the model was asked about.
    pub kernels_asked: usize,
    /// Kernels whose code keet found, edits shown, and seconds spent asking for edits.
    pub kernels_with_code: usize,
    pub edits_shown: usize,
    pub edit_s: f64,
    pub total_s: f64,
}

impl RunStats {
    /// Adds what another thread counted while asking the model (its kernels, findings, sentences,
    /// edits and seconds).
    pub fn absorb(&mut self, o: &RunStats) {
        self.llm_findings_shown += o.llm_findings_shown;
        self.llm_findings_repaired += o.llm_findings_repaired;
        self.llm_findings_dropped += o.llm_findings_dropped;
        self.prose.add(&o.prose);
        self.shown_ungrounded += o.shown_ungrounded;
        self.shown_gate_flagged += o.shown_gate_flagged;
        self.generate_s += o.generate_s;
        self.kernels_asked += o.kernels_asked;
        self.edits_shown += o.edits_shown;
        self.edit_s += o.edit_s;
    }
}

/// A loaded model and what identifies it in cache keys.
struct Model {
    engine: Engine,
    info: ModelInfo,
}

/// Which model the explain stage uses, known before any kernel needs it.
// One per run: the size of the resolved variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// `--no-llm`: the rule layer alone.
    None,
    /// Resolved (not loaded) and its file's SHA-256.
    Resolved(crate::llm::resolve::ResolvedModel, String),
    /// As a report recorded it (`keet merge`): resolved (`--model`, else the recorded path) and
    /// checked against the recorded hash only if a kernel still needs it.
    Recorded(ModelInfo),
}

/// Findings already made for a representative launch (by a shard, for `keet merge`), keyed by
/// the launch's file and position there.
pub type KnownFindings = std::collections::HashMap<(PathBuf, u32), KnownKernel>;

/// A shard's findings for one representative launch.
#[derive(Debug, Clone)]
pub struct KnownKernel {
    pub found: CachedFindings,
    /// Whether the shard had them from its cache.
    pub cached: bool,
    /// The shard's cache key of the analysis: used only when the whole batch gives the same key
    /// (a shard may have lacked another shard's source page, for instance).
    pub key: String,
}

/// The settings of `opts` as a report records them.
pub fn report_settings(opts: &ExplainOptions, input_files: usize) -> crate::batch::ReportSettings {
    crate::batch::ReportSettings {
        coverage_pct: opts.coverage_pct,
        top: opts.top,
        max_findings: opts.max_findings,
        no_llm: opts.no_llm,
        repair_attempts: opts.repair_attempts,
        source_files: opts.source_files.clone(),
        prompt_templates_sha256: prompt::templates_sha256(),
        shard: opts.shard.map(|(k, n)| [k, n]),
        input_files,
        prose: opts.prose,
        edit: opts.edit,
    }
}

/// Runs `keet explain` over `inputs`: a streaming pass over the files ([`crate::batch::scan`]),
/// then [`explain_table`].
pub fn explain(inputs: &[PathBuf], opts: &ExplainOptions) -> Result<(ExplainReport, RunStats), ExplainError> {
    let t0 = Instant::now();
    if !opts.no_llm {
        // A device that cannot run the model fails now, not after the scan (or never, when
        // every kernel's answer is cached).
        crate::llm::device::check_device(opts.engine.device.as_deref())?;
    }
    let mut files = crate::profile::expand_inputs(inputs).map_err(|e| ExplainError::Io(format!("listing inputs: {e}")))?;
    let input_files = files.len();
    if let Some((k, n)) = opts.shard {
        files = files.into_iter().enumerate().filter(|(i, _)| i % n == k).map(|(_, f)| f).collect();
    }
    let (table, errors) = crate::batch::scan(&files, opts.jobs, opts.progress);
    // Identify the model without loading it (the cache key needs its hash).
    let model = if opts.no_llm {
        ModelSource::None
    } else {
        let r = crate::llm::resolve::resolve_model(opts.engine.model.as_deref())?;
        let sha = crate::llm::resolve::model_sha256(&r)?;
        ModelSource::Resolved(r, sha)
    };
    let settings = report_settings(opts, input_files);
    explain_table(inputs, table, errors, opts, settings, model, &KnownFindings::new(), t0)
}

/// A chosen kernel before the model: its analysis, source lines, code, cache key and what a shard
/// or the cache already holds for it.
struct Prepared {
    la: LaunchAnalysis,
    source_lines_all: Vec<SourceLine>,
    located: Option<Result<code::Located, String>>,
    key: crate::cache::CacheKey,
    cached: Option<(CachedFindings, Option<i64>, bool)>,
    to_model: bool,
}

/// Loads the model when a chosen kernel needs it and asks about those kernels ([`concurrent`]):
/// the answers by rank, `None` where the model was not asked.
#[allow(clippy::too_many_arguments)]
fn ask_model(
    prepared: &[Prepared],
    chosen: &[(usize, KernelGroup)],
    reps: &[crate::batch::Rep],
    model: &mut Option<Model>,
    model_source: &ModelSource,
    model_sha: Option<&str>,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<Vec<Option<CachedFindings>>, ExplainError> {
    let mut answers: Vec<Option<CachedFindings>> = (0..prepared.len()).map(|_| None).collect();
    let Some(sha) = model_sha else { return Ok(answers) };
    // Nothing the rule layer can support: the model would have nothing to cite.
    let wanted: Vec<usize> = (0..prepared.len())
        .filter(|&i| prepared[i].cached.is_none() && prepared[i].to_model && !prepared[i].la.findings.is_empty())
        .collect();
    if wanted.is_empty() {
        return Ok(answers);
    }
    load_model(model, model_source, sha, opts, stats)?;
    let jobs: Vec<concurrent::ModelJob> = wanted
        .iter()
        .map(|&i| concurrent::ModelJob {
            rank: i,
            launch: &reps[i].launch,
            la: &prepared[i].la,
            group: &chosen[i].1,
            lines: &prepared[i].source_lines_all,
            located: prepared[i].located.as_ref().and_then(|l| l.as_ref().ok()),
        })
        .collect();
    let Model { engine, info } = model.take().expect("model loaded above");
    let (engine, found) = concurrent::answer_all(engine, &jobs, prepared.len(), opts, stats)?;
    *model = Some(Model { engine, info });
    for (i, f) in wanted.into_iter().zip(found) {
        answers[i] = Some(f);
    }
    Ok(answers)
}

/// The explain stage after the first pass (shared by `keet explain` and `keet merge`): ranks the
/// table's groups, re-reads the chosen representatives, explains them (`known` findings first,
/// then the cache, then the model or the rule layer) and assembles the report.
#[allow(clippy::too_many_arguments)]
pub fn explain_table(
    inputs: &[PathBuf],
    mut table: crate::batch::BatchTable,
    errors: Vec<FileError>,
    opts: &ExplainOptions,
    settings: crate::batch::ReportSettings,
    model_source: ModelSource,
    known: &KnownFindings,
    t0: Instant,
) -> Result<(ExplainReport, RunStats), ExplainError> {
    let mut stats = RunStats::default();
    let (ranked, total_ns) = table.ranked();
    // Only what choosing needs: the time and share of each group (no file lists yet).
    let shares: Vec<KernelGroup> = ranked
        .iter()
        .map(|&(_, t)| KernelGroup {
            name: String::new(),
            files: vec![],
            launch_ids: vec![],
            launches: 0,
            total_duration_ns: t,
            time_share_pct: if total_ns > 0.0 { 100.0 * t / total_ns } else { 0.0 },
        })
        .collect();
    let n_chosen = select::chosen_count(shares.iter(), opts.coverage_pct, opts.top);
    drop(shares);
    let skipped = ranked.len() - n_chosen;
    let entries: Vec<usize> = ranked[..n_chosen].iter().map(|r| r.0).collect();
    let chosen: Vec<(usize, KernelGroup)> = entries.iter().map(|&e| (e, table.kernel_group(e, total_ns))).collect();
    let reps = crate::batch::load_reps(&table, &entries).map_err(|e| ExplainError::Io(e.to_string()))?;
    stats.parse_s = t0.elapsed().as_secs_f64();

    let cache = match &opts.cache {
        Some(p) => crate::cache::Cache::open_or_skip(p)?,
        None => None,
    };
    let model_sha: Option<String> = match &model_source {
        ModelSource::None => None,
        ModelSource::Resolved(_, sha) => Some(sha.clone()),
        ModelSource::Recorded(info) => Some(info.sha256.clone()),
    };
    let mut model: Option<Model> = None;
    let mut kernels = Vec::new();
    let user_code = user_code(opts);
    // What each chosen kernel is, and whether a shard or the cache already holds its findings.
    let mut prepared: Vec<Prepared> = Vec::with_capacity(chosen.len());
    for (rank, ((entry, group), loaded)) in chosen.iter().zip(&reps).enumerate() {
        let launch = &loaded.launch;
        let rep = table.groups[*entry].rep;
        let la = analysis::analyse_launch_in(launch, Some(group.time_share_pct));
        let source_lines_all = source::hot_lines(launch, &opts.source_files);
        let located = opts.edit.then(|| kernel_code(&la, &loaded.code, &user_code));
        stats.kernels_with_code += usize::from(matches!(located, Some(Ok(_))));
        let code_key = located.as_ref().map(|l| code::code_sha256(l.as_ref().ok())).unwrap_or_default();
        let key = cache_key(&la, model_sha.as_deref().unwrap_or("none"), &source_lines_all, &code_key, opts.prose);
        table.groups[*entry].analysis_key = Some(key.to_string());
        let mut cached = None;
        let shard_made = known.get(&(table.files[rep.file as usize].clone(), rep.index)).filter(|k| k.key == key.as_str());
        if let Some(k) = shard_made {
            let id = match &cache {
                Some(c) => c.get(&key)?.map(|e| e.id),
                None => None,
            };
            cached = Some((k.found.clone(), id, k.cached));
        } else if let (Some(c), false) = (&cache, opts.refresh) {
            if let Some(e) = c.get(&key)? {
                if let Ok(cf) = serde_json::from_str::<CachedFindings>(&e.findings_json) {
                    cached = Some((cf, Some(e.id), true));
                }
            }
        }
        let to_model = opts.model_ranks.as_ref().is_none_or(|r| r.contains(&(rank + 1)));
        if !to_model {
            cached = None;
        }
        prepared.push(Prepared { la, source_lines_all, located, key, cached, to_model });
    }
    // The model's answers for the kernels neither known nor cached (several at once with --concurrency).
    let mut answers = ask_model(&prepared, &chosen, &reps, &mut model, &model_source, model_sha.as_deref(), opts, &mut stats)?;
    for (rank, (((_entry, group), loaded), p)) in chosen.iter().zip(&reps).zip(prepared).enumerate() {
        let launch = &loaded.launch;
        let Prepared { la, source_lines_all, located, key, cached, to_model } = p;
        let (found, cache_id, from_cache) = match cached {
            Some((cf, id, from_cache)) => {
                stats.kernels_from_cache += usize::from(from_cache);
                (cf, id, from_cache)
            }
            // Without an answer (no model, not asked, or nothing the rule layer can support for the
            // model to cite): the rule layer's findings.
            None => (answers[rank].take().unwrap_or_else(|| rules_only(launch, &la, &source_lines_all)), None, false),
        };
        let mut found = found;
        if found.code.is_none() {
            let why = if la.findings.is_empty() {
                "the rule layer found no problem to fix"
            } else if model_sha.is_none() {
                "no model (--no-llm): keet proposes edits with a model"
            } else {
                "the model was not asked about this kernel"
            };
            found.code = located.as_ref().map(|l| code::section_without_edit(l, why));
        }
        if stats.first_finding_s.is_none() {
            stats.first_finding_s = Some(t0.elapsed().as_secs_f64());
        }
        stats.kernels_explained += 1;
        let primary_speedup = la.findings.first().and_then(|f| f.estimated_speedup_pct);
        let verdict_line = verdict(&la);
        let mut k = KernelExplanation {
            rank: rank + 1,
            kernel: group.clone(),
            analysis: la,
            findings: found.findings.clone(),
            dropped: found.dropped.clone(),
            prose: found.prose,
            replaced: found.replaced.clone(),
            code: found.code.clone(),
            verdict: verdict_line,
            estimated_gain_ns: primary_speedup.map(|p| p / 100.0 * group.total_duration_ns),
            cached: from_cache,
            cache_id,
        };
        if let (Some(c), false, None, true) = (&cache, from_cache, cache_id, to_model) {
            let single = ExplainReport {
                schema: EXPLAIN_SCHEMA.into(),
                keet_version: env!("CARGO_PKG_VERSION").into(),
                model: model.as_ref().map(|m| m.info.clone()),
                inputs: group.files.clone(),
                total_duration_ns: group.total_duration_ns,
                kernels: vec![k.clone()],
                skipped_kernels: 0,
                errors: vec![],
                profile: Default::default(),
                settings: None,
                batch: None,
                prose_mode: model.as_ref().map(|_| opts.prose.as_str().to_string()),
                prose: found.prose,
                summary: None,
                sets: vec![],
            };
            let meta = crate::cache::EntryMeta {
                file: group.files.first().map(|p| p.display().to_string()).unwrap_or_default(),
                kernel: group.name.clone(),
                model: model.as_ref().map(|m| m.info.name.clone()).unwrap_or_else(|| "rules only".into()),
                verdict: found.verdict.clone(),
            };
            let findings_json = serde_json::to_string(&found).expect("findings serialise");
            let report_json = serde_json::to_string(&single).expect("report serialises");
            k.cache_id = Some(c.put(&key, &meta, &findings_json, &report_json)?);
        }
        kernels.push(k);
    }
    stats.total_s = t0.elapsed().as_secs_f64();
    let model_info = match (&model, &model_source) {
        (Some(m), _) => Some(m.info.clone()),
        (None, ModelSource::Resolved(r, sha)) => Some(ModelInfo {
            name: r
                .manifest
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_else(|| r.location.path().file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()),
            path: r.location.path().display().to_string(),
            sha256: sha.clone(),
            device: opts.engine.device.clone().unwrap_or_else(|| "cpu".into()),
        }),
        (None, ModelSource::Recorded(info)) => Some(info.clone()),
        (None, ModelSource::None) => None,
    };
    let prose_mode = model_info.as_ref().map(|_| opts.prose.as_str().to_string());
    let mut report = build_report(inputs, model_info, total_ns, kernels, skipped, errors, settings, table, prose_mode);
    if let Some(sha) = &model_sha {
        if report.kernels.len() >= 2 && opts.summary {
            report.summary = Some(profile_summary(&report, &mut model, &model_source, sha, cache.as_ref(), opts, &mut stats)?);
            if report.model.is_none() {
                report.model = model.as_ref().map(|m| m.info.clone());
            }
        }
    }
    stats.total_s = t0.elapsed().as_secs_f64();
    Ok((report, stats))
}

/// Loads the model on first use.
fn load_model<'a>(
    model: &'a mut Option<Model>,
    source: &ModelSource,
    sha: &str,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<&'a mut Model, ExplainError> {
    if model.is_none() {
        let resolved = match source {
            ModelSource::Resolved(r, _) => r.clone(),
            ModelSource::Recorded(info) => resolve_recorded(info, opts)?,
            ModelSource::None => unreachable!("a model hash without a model"),
        };
        let tl = Instant::now();
        if opts.progress {
            eprintln!("keet: loading {} ...", resolved.location.path().display());
        }
        let engine = Engine::load_resolved(
            &resolved,
            opts.engine.device.as_deref().unwrap_or("cpu"),
            crate::llm::threads::configure(opts.engine.threads),
        )?;
        stats.model_load_s = tl.elapsed().as_secs_f64();
        let info = ModelInfo {
            name: engine.info.name.clone(),
            path: engine.info.path.display().to_string(),
            sha256: sha.to_string(),
            device: engine.info.device.clone(),
        };
        *model = Some(Model { engine, info });
    }
    Ok(model.as_mut().expect("model loaded above"))
}

/// The profile summary: from the cache when the same facts, model and prompts made one, else asked
/// of the model (then cached).
fn profile_summary(
    report: &ExplainReport,
    model: &mut Option<Model>,
    source: &ModelSource,
    sha: &str,
    cache: Option<&crate::cache::Cache>,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<ProfileSummary, ExplainError> {
    let facts = summary::summary_facts(report);
    let decoding_json = serde_json::to_string(&(decoding(), "summary-v1", opts.prose)).expect("options serialise");
    let templates = format!("{}\0{}", prompt::templates_sha256(), crate::cache::sha256_hex(summary::SUMMARY.as_bytes()));
    let key = crate::cache::CacheKey::new(&crate::cache::KeyParts {
        facts_json: &facts.facts,
        model_sha256: sha,
        prompt_templates_sha256: &templates,
        decoding_json: &decoding_json,
        keet_version: env!("CARGO_PKG_VERSION"),
    });
    if let (Some(c), false) = (cache, opts.refresh) {
        if let Some(e) = c.get(&key)? {
            if let Ok(found) = serde_json::from_str::<ProfileSummary>(&e.findings_json) {
                return Ok(found);
            }
        }
    }
    let m = load_model(model, source, sha, opts, stats)?;
    let tg = Instant::now();
    if opts.progress {
        eprintln!("keet: asking {} for the profile summary ...", m.info.name);
    }
    let found = summary::summarize(&mut m.engine, &facts, prompt::system(opts.prose.as_str())?, opts.repair_attempts)?;
    stats.generate_s += tg.elapsed().as_secs_f64();
    if opts.progress {
        eprintln!("keet: summary done in {:.1} s", tg.elapsed().as_secs_f64());
    }
    if let Some(c) = cache {
        let meta = crate::cache::EntryMeta {
            file: report.inputs.first().map(|p| p.display().to_string()).unwrap_or_default(),
            kernel: "(profile summary)".into(),
            model: m.info.name.clone(),
            verdict: found.text.chars().take(120).collect(),
        };
        // `keet show` renders the entry's report: the summary on its own.
        let mut alone = report.clone();
        alone.kernels.clear();
        alone.batch = None;
        alone.summary = Some(found.clone());
        let report_json = serde_json::to_string(&alone).expect("report serialises");
        c.put(&key, &meta, &serde_json::to_string(&found).expect("summary serialises"), &report_json)?;
    }
    Ok(found)
}

/// A kernel name cut to `max` characters for a progress line.
fn trunc_name(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        format!("{}...", name.chars().take(max).collect::<String>())
    }
}

/// Assembles the whole report from the explained kernels; report-level aggregates are computed
/// here, over the whole batch, for `keet explain` and `keet merge` alike.
#[allow(clippy::too_many_arguments)]
pub fn build_report(
    inputs: &[PathBuf],
    model: Option<ModelInfo>,
    total_duration_ns: f64,
    kernels: Vec<KernelExplanation>,
    skipped_kernels: usize,
    errors: Vec<FileError>,
    settings: crate::batch::ReportSettings,
    table: crate::batch::BatchTable,
    prose_mode: Option<String>,
) -> ExplainReport {
    let profile = rules::profile_view::profile_view(&kernel_times(&table));
    ExplainReport {
        schema: EXPLAIN_SCHEMA.into(),
        keet_version: env!("CARGO_PKG_VERSION").into(),
        model,
        inputs: inputs.to_vec(),
        total_duration_ns,
        prose_mode,
        prose: kernels.iter().fold(ProseCounts::default(), |mut a, k| {
            a.add(&k.prose);
            a
        }),
        kernels,
        skipped_kernels,
        errors,
        profile,
        settings: Some(settings),
        batch: Some(table),
        summary: None,
        sets: vec![],
    }
}

/// Resolves the model a report recorded (`--model` first, else its recorded path) and checks it
/// is the same file (SHA-256).
fn resolve_recorded(info: &ModelInfo, opts: &ExplainOptions) -> Result<crate::llm::resolve::ResolvedModel, ExplainError> {
    let given = opts.engine.model.clone().unwrap_or_else(|| info.path.clone());
    let r = crate::llm::resolve::resolve_model(Some(&given))?;
    let sha = crate::llm::resolve::sha256_file(r.location.path())?;
    if sha != info.sha256 {
        return Err(ExplainError::Io(format!(
            "model {}: SHA-256 {sha}, but the reports were made with {} ({}, SHA-256 {}); pass that model with --model",
            r.location.path().display(),
            info.name,
            info.path,
            info.sha256
        )));
    }
    Ok(r)
}

/// Every kernel group of the batch as the profile view needs it: family, time, and the estimated
/// gain of its representative's primary problem (recorded in the table by the first pass).
pub fn kernel_times(table: &crate::batch::BatchTable) -> Vec<rules::profile_view::KernelTime> {
    table
        .groups
        .iter()
        .map(|g| {
            let total = g.total_duration_ns.value();
            rules::profile_view::KernelTime {
                name: g.name.clone(),
                block_size: g.block_size,
                grid_size: g.grid_size,
                family: g.family,
                launches: g.launches,
                total_ns: total,
                gain_ns: g.primary_gain_pct.map(|p| p / 100.0 * total),
                primary: g.primary.clone(),
            }
        })
        .collect()
}

/// The cache key of one kernel analysis: its facts and identity, the model, the prompt templates,
/// the decoding settings and keet's version.
/// `code_sha256` identifies the kernel's code the model was shown (empty when none).
pub fn cache_key(
    la: &LaunchAnalysis,
    model_sha256: &str,
    source_lines: &[SourceLine],
    code_sha256: &str,
    mode: ProseMode,
) -> crate::cache::CacheKey {
    let code = if code_sha256.is_empty() { String::new() } else { format!("{code_sha256}\0{}", code::files_sha256()) };
    let facts_json = serde_json::to_string(&(&la.name, &la.block_size, &la.grid_size, &la.facts, &la.findings, source_lines, code))
        .expect("facts serialise");
    let decoding_json = serde_json::to_string(&(decoding(), schema::CLAIM_MAX_CHARS, "findings-v14", mode)).expect("options serialise");
    crate::cache::CacheKey::new(&crate::cache::KeyParts {
        facts_json: &facts_json,
        model_sha256,
        prompt_templates_sha256: &prompt::templates_sha256(),
        decoding_json: &decoding_json,
        keet_version: env!("CARGO_PKG_VERSION"),
    })
}

/// A rule finding shown as a report finding (origin: rules).
pub fn from_rule(la: &LaunchAnalysis, launch: &Launch, r: &rules::Finding, lines: &[SourceLine]) -> ShownFinding {
    let mut evidence = Vec::new();
    for key in &r.facts {
        if let Some(f) = la.facts.get(*key) {
            for e in &f.evidence {
                if let Some(m) = launch.metrics.get(&e.metric) {
                    if let Some(v) = m.as_f64() {
                        if !evidence.iter().any(|c: &Citation| c.metric == e.metric) {
                            evidence.push(Citation { metric: e.metric.clone(), value: v, unit: m.unit.symbol() });
                        }
                    }
                }
            }
        }
    }
    ShownFinding {
        origin: Origin::Rules,
        text_origin: None,
        finding: Finding {
            category: r.category,
            severity: r.severity,
            claim: r.claim.clone(),
            evidence,
            explanation: r.explanation.clone(),
            suggestions: vec![r.suggestion.clone()],
        },
        estimated_speedup_pct: r.estimated_speedup_pct,
        source_lines: source::lines_for(r.category, lines),
    }
}

/// The verdict always comes from the diagnosis (the rule layer's primary finding), never from model text.
fn verdict(la: &LaunchAnalysis) -> String {
    match la.findings.first() {
        Some(f) => format!("{}: {}", f.category.as_str(), f.claim),
        // Without the metrics to place the regime, absence of findings says nothing.
        None if la.diagnosis.regime == "unknown" => format!("not diagnosed ({})", la.diagnosis.summary),
        None => format!("no problem found ({})", la.diagnosis.summary),
    }
}

fn rules_only(launch: &Launch, la: &LaunchAnalysis, lines: &[SourceLine]) -> CachedFindings {
    let findings: Vec<ShownFinding> = la.findings.iter().map(|r| from_rule(la, launch, r, lines)).collect();
    CachedFindings { verdict: verdict(la), findings, dropped: vec![], prose: ProseCounts::default(), replaced: vec![], code: None }
}

#[derive(serde::Deserialize)]
struct ModelOutput {
    findings: Vec<Finding>,
}

/// The first words of an expert sentence up to its first number or punctuation (at most `max`),
/// for `guided` sentences; empty when the sentence opens with a number.
fn opening(text: &str, max: usize) -> String {
    let mut out = Vec::new();
    for w in text.split_whitespace().take(max) {
        let letters = w.trim_end_matches([',', ';', ':', '.']);
        if letters.is_empty() || !letters.chars().all(|c| c.is_ascii_alphabetic()) {
            break;
        }
        out.push(letters);
        if letters.len() != w.len() {
            break;
        }
    }
    out.join(" ")
}

/// The longest run of whole sentences from the start of `paragraph` that passes `passes`, and the
/// sentences after it; `None` when the first sentence already fails or nothing is cut.
fn passing_prefix(paragraph: &str, passes: impl Fn(&str) -> bool) -> Option<(String, String)> {
    let parts: Vec<&str> = paragraph.split_inclusive(". ").map(str::trim).filter(|p| !p.is_empty()).collect();
    (1..parts.len()).rev().find_map(|n| {
        let kept = parts[..n].join(" ");
        passes(&kept).then(|| (kept, parts[n..].join(" ")))
    })
}

/// The sentences of an expert text (split after ". " and "; "), each ending with a period.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        let end = matches!(c, '.' | ';') && chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        if end {
            let t = cur.trim().trim_end_matches(';').to_string();
            if t.split_whitespace().count() >= 3 {
                let mut t = t;
                if !t.ends_with('.') {
                    t.push('.');
                }
                let mut cs = t.chars();
                if let Some(f) = cs.next() {
                    t = f.to_uppercase().chain(cs).collect();
                }
                out.push(t);
            }
            cur.clear();
        }
    }
    if cur.split_whitespace().count() >= 3 {
        out.push(format!("{}.", cur.trim()));
    }
    out
}

/// Per category, the text schema of each field under `mode`: free sentences, guided openings, or
/// the expert causes and fixes the facts support.
fn text_schema(
    ctx: &Context,
    mode: ProseMode,
    c: rules::Category,
    field: schema::TextField,
    grounding: &crate::grounding::Grounding,
) -> Result<serde_json::Value, ExplainError> {
    use schema::TextField::*;
    let Some(r) = ctx.rules.iter().find(|r| r.category == c) else {
        return Ok(schema::grounded_text(field, grounding));
    };
    Ok(match (mode, field) {
        // A suggestion opens with what to do: the grammar offers only the gate's verbs.
        (ProseMode::Free, Suggestion) => {
            let mut shape = schema::grounded_shape(Suggestion);
            shape.openings = crate::prose::gate().suggestion_verbs();
            schema::grounded_text_shaped(&shape, grounding)
        }
        (ProseMode::Free, f) => schema::grounded_text(f, grounding),
        (_, Claim) => schema::opening_text(&opening(&r.claim, 3), 3, 12),
        (ProseMode::Guided, Explanation) => schema::opening_text(&opening(&r.explanation, 3), 4, 18),
        (ProseMode::Guided, Suggestion) => schema::opening_text(&opening(&r.suggestion, 3), 3, 12),
        (ProseMode::Choose, Explanation) => {
            // Causes: the category's expert explanation, and what the launch's own top stall reasons mean.
            let mut causes = sentences(&r.explanation);
            for st in &ctx.facts.stalls {
                causes.push(prompt::stall_cause(&st.reason, rules::text::stall_hint(&st.reason))?);
            }
            causes.retain(|s| validate::text_numbers_known(ctx, s));
            if causes.is_empty() {
                return Ok(schema::opening_text(&opening(&r.explanation, 3), 4, 18));
            }
            schema::choice_text(&causes)
        }
        (ProseMode::Choose, Suggestion) => {
            let mut fixes = sentences(&r.suggestion);
            fixes.retain(|s| validate::text_numbers_known(ctx, s));
            if fixes.is_empty() {
                return Ok(schema::opening_text(&opening(&r.suggestion, 3), 3, 12));
            }
            schema::choice_text(&fixes)
        }
    })
}

/// The rule layer's finding for a category (its expert text replaces failing sentences).
fn expert_for(la: &LaunchAnalysis, c: rules::Category) -> Option<&rules::Finding> {
    la.findings.iter().find(|r| r.category == c)
}

fn sentence_count(f: &Finding) -> usize {
    2 + f.suggestions.len()
}

fn field_text(f: &Finding, field: Field) -> Option<&str> {
    match field {
        Field::Claim => Some(&f.claim),
        Field::Explanation => Some(&f.explanation),
        Field::Suggestion(i) => f.suggestions.get(i).map(String::as_str),
    }
}

/// Asks the model, validates, repairs once, drops what still fails, puts every sentence through
/// the prose gate (one re-ask, then the expert text), and fills gaps from the rules.
fn explain_with_model(
    engine: &mut dyn Generate,
    launch: &Launch,
    la: &LaunchAnalysis,
    group: &KernelGroup,
    lines: &[SourceLine],
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<CachedFindings, ExplainError> {
    let ctx = Context { launch, facts: &la.facts, rules: &la.findings };
    let kernel_facts = prompt::kernel_facts(&ctx, la, group, lines);
    let grounding = &kernel_facts.grounding;
    let mut texts = std::collections::BTreeMap::new();
    for r in &la.findings {
        for f in [schema::TextField::Claim, schema::TextField::Explanation, schema::TextField::Suggestion] {
            texts.insert((r.category.as_str(), f as u8), text_schema(&ctx, opts.prose, r.category, f, grounding)?);
        }
    }
    let Some(schema) = schema::findings_schema_with(&ctx, opts.max_findings, |c, f| {
        texts.get(&(c.as_str(), f as u8)).cloned().unwrap_or_else(|| schema::free_text(f))
    }) else {
        return Ok(rules_only(launch, la, lines));
    };
    let mut gen = decoding();
    gen.max_tokens = schema::token_budget(&schema);
    let system = prompt::system(opts.prose.as_str())?;
    let user = prompt::kernel(&ctx, &kernel_facts, opts.max_findings)?;
    // KEET_TRACE=1: the prompt and every answer on stderr, for whoever tunes prompts and checks.
    let trace = std::env::var_os("KEET_TRACE").is_some();
    if trace {
        eprintln!("--- prompt for {}\n{user}", launch.name);
    }
    let mut messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
    let mut dropped: Vec<DroppedFinding> = Vec::new();
    let mut counts = ProseCounts::default();
    // The shared ask loop: the findings that validate are kept; while none does, the model is
    // re-asked (still under the schema) with the validator's reasons. Findings refused beside an
    // accepted one are reported as dropped.
    let mut refused_beside: Vec<(Finding, Vec<String>)> = Vec::new();
    let question = crate::llm::ask::Ask { messages: messages.clone(), schema: &schema, options: gen.clone(), reasks: opts.repair_attempts };
    let outcome = crate::llm::ask::ask(
        engine,
        question,
        |out: &mut ModelOutput| {
            refused_beside.clear();
            if trace {
                eprintln!("--- answer\n{}", serde_json::to_string_pretty(&out.findings).unwrap_or_default());
            }
            let mut kept: Vec<Finding> = Vec::new();
            let mut reasons_all: Vec<String> = Vec::new();
            for mut f in std::mem::take(&mut out.findings) {
                // The grammar cannot express uniqueness: drop repeated citations and categories.
                let mut seen = std::collections::HashSet::new();
                f.evidence.retain(|c| seen.insert(c.metric.clone()));
                if kept.iter().any(|k| k.category == f.category) {
                    continue;
                }
                // Only what the finding holds as a whole decides here; each sentence is judged on
                // its own below, so one wrong sentence costs that sentence, not the finding.
                match validate::validate_structure(&ctx, &f) {
                    Ok(()) => kept.push(f),
                    Err(reasons) => {
                        reasons_all.extend(reasons.iter().map(|r| format!("{}: {r}", f.category.as_str())));
                        refused_beside.push((f, reasons));
                    }
                }
            }
            if kept.is_empty() {
                return Err(if reasons_all.is_empty() { vec!["the answer holds no finding".into()] } else { reasons_all });
            }
            out.findings = kept;
            Ok(())
        },
        |reasons| prompt::repair(reasons).map_err(ExplainError::from),
    )?;
    let repaired = outcome.repaired();
    let mut accepted: Vec<(Finding, Origin)> = Vec::new();
    match outcome.accepted {
        Some(out) => {
            if repaired {
                stats.llm_findings_repaired += out.findings.len();
                // The first answer's sentences were re-asked; the accepted ones are counted below.
                counts.reasked += out.findings.iter().map(sentence_count).sum::<usize>();
            }
            let origin = if repaired { Origin::LlmRepaired } else { Origin::Llm };
            accepted.extend(out.findings.into_iter().map(|f| (f, origin)));
            for (f, reasons) in refused_beside {
                counts.replaced += sentence_count(&f);
                dropped.push(DroppedFinding { finding: f, reasons });
            }
        }
        None => {
            let reasons: Vec<String> = outcome
                .refusals
                .iter()
                .enumerate()
                .flat_map(|(i, r)| r.iter().map(move |x| if i == 0 { x.clone() } else { format!("after the re-ask: {x}") }))
                .collect();
            let finding = outcome.last_refused.and_then(|o| o.findings.into_iter().next()).or_else(|| refused_beside.pop().map(|f| f.0));
            let n = finding.as_ref().map(sentence_count).unwrap_or(0);
            counts.reasked += n;
            counts.replaced += n;
            dropped.push(DroppedFinding { finding: finding.unwrap_or_else(placeholder), reasons });
        }
    }
    // The prose gate: every sentence, one re-ask for those that fail, then the expert text.
    let gate = crate::prose::gate();
    let rows: Vec<(Option<u64>, &str)> = launch.source.iter().flat_map(|s| s.rows.iter().map(|r| (r.line, r.text.as_str()))).collect();
    let code_words = crate::mechanism::code_words(&rows);
    let mut shown: Vec<ShownFinding> = Vec::new();
    let mut replaced: Vec<ReplacedSentence> = Vec::new();
    let mut earlier: Vec<String> = Vec::new();
    let chosen_writer = |field: Field| match (opts.prose, field) {
        (ProseMode::Choose, Field::Explanation | Field::Suggestion(_)) => Writer::ModelChosen,
        _ => Writer::Model,
    };
    for (mut f, mut origin) in accepted {
        let Some(expert) = expert_for(la, f.category) else { continue };
        // The gate's checks of sense and the validator's checks of each sentence's numbers,
        // comparisons and regime words, one list of reasons per field.
        let sentence_check = |f: &Finding, field: Field, text: &str, others: &[&str]| {
            let mut reasons = validate::sentence_errors(&ctx, grounding, f.category, field.kind(), text);
            if field == Field::Explanation && crate::mechanism::only_restates(text) {
                reasons.push(restates_reason(&ctx, grounding, f.category));
            }
            for r in gate.check_field_with(&ctx, f.category, field, text, others, &grounding.fact_words) {
                if !reasons.contains(&r) {
                    reasons.push(r);
                }
            }
            reasons
        };
        let fails: Vec<(Field, Vec<String>)> = {
            let mut seen: Vec<String> = earlier.clone();
            let mut out = Vec::new();
            for field in std::iter::once(Field::Claim)
                .chain(std::iter::once(Field::Explanation))
                .chain((0..f.suggestions.len()).map(Field::Suggestion))
            {
                let mut text = field_text(&f, field).unwrap_or_default().to_string();
                let others: Vec<&str> = seen.iter().map(String::as_str).collect();
                let mut reasons = sentence_check(&f, field, &text, &others);
                // A paragraph whose first sentences pass keeps them: the sentences from the first
                // failing one on are cut (and listed with their reasons), not re-asked.
                if field == Field::Explanation && !reasons.is_empty() {
                    if let Some((kept, cut)) = passing_prefix(&text, |t| sentence_check(&f, field, t, &others).is_empty()) {
                        replaced.push(ReplacedSentence {
                            category: f.category,
                            field: "explanation (sentences cut)".into(),
                            texts: vec![cut],
                            reasons: std::mem::take(&mut reasons),
                        });
                        text = kept;
                        set_field(&mut f, field, text.clone());
                    }
                }
                // Sentences that only restate a facts line are not an explanation: left out when
                // the paragraph has others.
                // What is left must pass the gate on its own (a sentence cut from its number ends
                // mid-sentence: "... would save at most.").
                if field == Field::Explanation && reasons.is_empty() {
                    if let Some((kept, restating)) =
                        crate::mechanism::without_restating(&text).filter(|(kept, _)| sentence_check(&f, field, kept, &others).is_empty())
                    {
                        replaced.push(ReplacedSentence {
                            category: f.category,
                            field: "explanation (sentences left out)".into(),
                            texts: vec![restating],
                            reasons: vec!["it only restates the facts".into()],
                        });
                        text = kept;
                        set_field(&mut f, field, text.clone());
                    }
                }
                if !reasons.is_empty() {
                    out.push((field, reasons));
                }
                seen.push(text);
            }
            out
        };
        let mut writers: Vec<(Field, Writer)> = std::iter::once(Field::Claim)
            .chain(std::iter::once(Field::Explanation))
            .chain((0..f.suggestions.len()).map(Field::Suggestion))
            .map(|fl| (fl, chosen_writer(fl)))
            .collect();
        if !fails.is_empty() {
            counts.reasked += fails.len();
            origin = Origin::LlmRepaired;
            let fail_list: Vec<(String, String, Vec<String>)> =
                fails.iter().map(|(fl, r)| (fl.label(), field_text(&f, *fl).unwrap_or_default().to_string(), r.clone())).collect();
            messages.truncate(2);
            messages.push(ChatMessage::assistant(serde_json::to_string(&serde_json::json!({"findings": [&f]})).unwrap_or_default()));
            messages.push(ChatMessage::user(prompt::prose_repair(f.category.as_str(), &gate.topic_words(&ctx, f.category), &fail_list)?));
            // Greedy decoding would give the same words again: the re-ask samples (seeded, so runs repeat).
            let regen = GenerateOptions { temperature: 0.7, top_p: 0.9, seed: 11, ..gen.clone() };
            // A re-ask too long for the model's context gets no answer: the expert text stands.
            let answer = match engine.generate(&messages, &regen, Some(&schema)) {
                Ok(g) => Some(g.text),
                Err(crate::llm::LlmError::PromptTooLong { .. }) => None,
                Err(other) => return Err(other.into()),
            };
            if trace {
                eprintln!(
                    "--- re-asked sentences: {fail_list:?}\n--- answer\n{}",
                    answer.as_deref().unwrap_or("(too long for the context)")
                );
            }
            let again: Option<Finding> = answer
                .and_then(|text| serde_json::from_str::<ModelOutput>(&text).ok())
                // Each new sentence is checked on its own below (validator and gate).
                .and_then(|o| o.findings.into_iter().find(|n| n.category == f.category));
            for (field, reasons) in &fails {
                let old = field_text(&f, *field).unwrap_or_default().to_string();
                let new = again.as_ref().and_then(|a| match field {
                    Field::Suggestion(i) => a.suggestions.get(*i).or(a.suggestions.first()).cloned(),
                    other => field_text(a, *other).map(String::from),
                });
                // The other sentences of this finding and the kernel's earlier ones: no repeats.
                let others: Vec<String> = earlier
                    .iter()
                    .cloned()
                    .chain(
                        [Field::Claim, Field::Explanation]
                            .into_iter()
                            .chain((0..f.suggestions.len()).map(Field::Suggestion))
                            .filter(|fl| fl != field)
                            .filter_map(|fl| field_text(&f, fl).map(String::from)),
                    )
                    .collect();
                let others_ref: Vec<&str> = others.iter().map(String::as_str).collect();
                let new_reasons = new.as_ref().map(|n| sentence_check(&f, *field, n, &others_ref));
                match (new, new_reasons) {
                    (Some(n), Some(r)) if r.is_empty() => set_field(&mut f, *field, n),
                    (n, r) => {
                        counts.replaced += 1;
                        let mut texts = vec![old];
                        let mut all = reasons.clone();
                        if let (Some(n), Some(r)) = (n, r) {
                            texts.push(n);
                            all.extend(r.into_iter().map(|x| format!("re-asked: {x}")));
                        } else {
                            all.push("re-asked: no valid answer".into());
                        }
                        replaced.push(ReplacedSentence { category: f.category, field: field.label(), texts, reasons: all });
                        let text = match field {
                            Field::Claim => expert.claim.clone(),
                            Field::Explanation => expert.explanation.clone(),
                            Field::Suggestion(_) => expert.suggestion.clone(),
                        };
                        set_field(&mut f, *field, text);
                        if let Some(w) = writers.iter_mut().find(|w| w.0 == *field) {
                            w.1 = Writer::Expert;
                        }
                    }
                }
            }
        }
        // A sentence that copies the expert text the prompt showed (the verdict, the fix) is the
        // expert's words chosen by the model, not the model's own: marked and counted as such.
        {
            // The cause-and-effect lines the prompt showed are keet's words too.
            let expert_texts: Vec<String> = la
                .findings
                .iter()
                .flat_map(|r| [r.claim.clone(), r.suggestion.clone()].into_iter().chain(sentences(&r.explanation)))
                .chain(la.findings.iter().flat_map(|r| prompt::cause_and_effect(&ctx, grounding, r.category)))
                .collect();
            let expert_refs: Vec<&str> = expert_texts.iter().map(String::as_str).collect();
            for (field, writer) in writers.iter_mut() {
                if *writer == Writer::Model && field_text(&f, *field).is_some_and(|t| crate::prose::copies_any(t, &expert_refs)) {
                    *writer = Writer::ModelChosen;
                }
            }
        }
        // The expert suggestion once, not as several replaced suggestions.
        let mut keep = Vec::new();
        let mut sug_writers = Vec::new();
        for (i, s) in f.suggestions.iter().enumerate() {
            let w = writers.iter().find(|w| w.0 == Field::Suggestion(i)).map(|w| w.1).unwrap_or(Writer::Expert);
            if !keep.contains(s) {
                keep.push(s.clone());
                sug_writers.push(w);
            }
        }
        f.suggestions = keep;
        let writer_of = |fl: Field| writers.iter().find(|w| w.0 == fl).map(|w| w.1).unwrap_or(Writer::Expert);
        let mut text_origin = TextOrigin {
            claim: writer_of(Field::Claim),
            explanation: writer_of(Field::Explanation),
            suggestions: sug_writers,
            kinds: Vec::new(),
        };
        text_origin.kinds = kinds_of_sentences(&f, &text_origin, &code_words);
        let model_sentences =
            [text_origin.claim, text_origin.explanation].iter().chain(&text_origin.suggestions).filter(|w| **w != Writer::Expert).count();
        counts.shown += model_sentences;
        earlier.push(f.claim.clone());
        earlier.push(f.explanation.clone());
        earlier.extend(f.suggestions.iter().cloned());
        // Every sentence replaced: the rule finding as it is, with its own evidence.
        if model_sentences == 0 {
            if let Some(r) = la.findings.iter().find(|r| r.category == f.category) {
                shown.push(from_rule(la, launch, r, lines));
                continue;
            }
            origin = Origin::Rules;
        }
        let mut s = shown_llm(la, f, origin, lines);
        s.text_origin = Some(text_origin);
        shown.push(s);
    }
    stats.llm_findings_shown += shown.iter().filter(|s| s.origin != Origin::Rules).count();
    stats.llm_findings_dropped += dropped.len();
    // Audit what a reader will see: every model sentence shown, checked again on its own.
    for s in &shown {
        let Some(to) = &s.text_origin else { continue };
        let f = &s.finding;
        let fields = [(Field::Claim, &f.claim, to.claim), (Field::Explanation, &f.explanation, to.explanation)]
            .into_iter()
            .chain(f.suggestions.iter().zip(&to.suggestions).enumerate().map(|(i, (t, w))| (Field::Suggestion(i), t, *w)));
        for (field, text, writer) in fields {
            if writer == Writer::Expert {
                continue;
            }
            stats.shown_ungrounded += usize::from(!grounding.ungrounded(text).is_empty());
            stats.shown_gate_flagged += usize::from(
                !gate.check_field_with(&ctx, f.category, field, text, &[], &grounding.fact_words).is_empty()
                    || !validate::sentence_errors(&ctx, grounding, f.category, field.kind(), text).is_empty(),
            );
        }
    }
    stats.prose.add(&counts);
    // The rule layer fills every gap the model left, marked as such.
    for r in &la.findings {
        if !shown.iter().any(|s| s.finding.category == r.category) {
            shown.push(from_rule(la, launch, r, lines));
        }
    }
    // Most important first: the rule layer's order of categories.
    let order = |c: rules::Category| la.findings.iter().position(|r| r.category == c).unwrap_or(usize::MAX);
    shown.sort_by_key(|s| order(s.finding.category));
    Ok(CachedFindings { verdict: verdict(la), findings: shown, dropped, prose: counts, replaced, code: None })
}

/// The user's `--source FILE|DIR` code, read once per run; warnings (a file not UTF-8, huge or
/// unparsable) go to stderr and the explanation goes on without that file.
fn user_code(opts: &ExplainOptions) -> Vec<keet_code::CodeFile> {
    if !opts.edit {
        return Vec::new();
    }
    let (files, warnings) = code::read_user_code(&opts.source_files);
    for w in warnings {
        eprintln!("keet: warning: {w}");
    }
    files
}

/// The kernel's code, or why there is none: a library's or framework's kernel is not the user's
/// code (its fixes are shapes, dtype, fusion or configuration), so keet does not look for it.
fn kernel_code(
    la: &LaunchAnalysis,
    embedded: &[crate::profile::SourceFile],
    user: &[keet_code::CodeFile],
) -> Result<code::Located, String> {
    let kind = &la.diagnosis.kernel;
    match kind.origin {
        rules::kind::Origin::Library | rules::kind::Origin::Framework => Err(format!(
            "a {} kernel: its code is not yours to edit (change shapes, dtype, fusion or configuration instead)",
            kind.library.as_deref().unwrap_or(kind.origin.as_str())
        )),
        _ => code::locate(&la.name, embedded, user),
    }
}

/// One kernel whose code keet found, explained: what the edit question needs.
struct ForEdit<'a> {
    launch: &'a Launch,
    la: &'a LaunchAnalysis,
    group: &'a KernelGroup,
    lines: &'a [SourceLine],
    found: &'a CachedFindings,
    located: &'a code::Located,
}

/// Asks for the one checked edit of the first shown finding that can be fixed in the kernel's code.
fn ask_for_edit(
    engine: &mut dyn Generate,
    k: ForEdit<'_>,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<CodeSection, ExplainError> {
    let categories: Vec<rules::Category> = k.found.findings.iter().map(|f| f.finding.category).collect();
    let Some(shown) = code::edit_target(&categories).map(|i| &k.found.findings[i]) else {
        return Ok(CodeSection { kernel: Some(k.located.reference()), no_edit: Some("no finding to fix".into()), ..Default::default() });
    };
    let category = shown.finding.category;
    let ctx = Context { launch: k.launch, facts: &k.la.facts, rules: &k.la.findings };
    let facts = prompt::kernel_facts(&ctx, k.la, k.group, k.lines);
    // The explanation's sense against the profile: the validator's checks and the prose gate's.
    let check_sense = |text: &str, grounding: &crate::grounding::Grounding| {
        let mut reasons = validate::sentence_errors(&ctx, grounding, category, "explanation", text);
        for r in crate::prose::gate().check_field_with(&ctx, category, Field::Explanation, text, &[], &grounding.fact_words) {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        reasons
    };
    let hot: Vec<code::HotLine> = k
        .lines
        .iter()
        .map(|l| code::HotLine { file: l.file.clone(), line: l.line, share_pct: l.share_pct, counter: l.counter.clone() })
        .collect();
    let started = Instant::now();
    let question = code::EditQuestion {
        finding: code::EditTarget { category, claim: &shown.finding.claim, explanation: &shown.finding.explanation },
        grounding: &facts.grounding,
        links: prompt::cause_and_effect(&ctx, &facts.grounding, category),
        check_sense: &check_sense,
        located: k.located,
        hot: &hot,
        reasks: opts.repair_attempts,
        decoding: decoding(),
    };
    let section = code::propose_edit(engine, question)?;
    stats.edit_s += started.elapsed().as_secs_f64();
    stats.edits_shown += usize::from(section.edit.is_some());
    Ok(section)
}

/// The re-ask reason for an explanation that only restates facts: what it should join instead.
fn restates_reason(ctx: &Context, grounding: &crate::grounding::Grounding, category: rules::Category) -> String {
    let hints = prompt::cause_and_effect(ctx, grounding, category);
    let example = hints.first().map(|h| format!(", as in: {h}")).unwrap_or_default();
    format!("it only restates the facts, which the engineer already sees; say what causes what in this kernel{example}")
}

/// What each sentence the model wrote or chose does, in report order.
fn kinds_of_sentences(f: &Finding, origin: &TextOrigin, code_words: &[String]) -> Vec<report::KindOfSentence> {
    let mut fields: Vec<(String, &str, Writer)> =
        vec![("claim".into(), f.claim.as_str(), origin.claim), ("explanation".into(), f.explanation.as_str(), origin.explanation)];
    fields.extend(
        f.suggestions.iter().zip(&origin.suggestions).enumerate().map(|(i, (t, w))| (format!("suggestion {}", i + 1), t.as_str(), *w)),
    );
    let mut out = Vec::new();
    for (field, text, writer) in fields {
        if writer == Writer::Expert {
            continue;
        }
        for s in text.split_inclusive(". ").map(str::trim).filter(|s| !s.is_empty()) {
            let kind = crate::mechanism::classify(s, code_words);
            out.push(report::KindOfSentence { field: field.clone(), text: s.to_string(), kind, writer });
        }
    }
    out
}

fn set_field(f: &mut Finding, field: Field, text: String) {
    match field {
        Field::Claim => f.claim = text,
        Field::Explanation => f.explanation = text,
        Field::Suggestion(i) => {
            if let Some(s) = f.suggestions.get_mut(i) {
                *s = text;
            }
        }
    }
}

fn shown_llm(la: &LaunchAnalysis, f: Finding, origin: Origin, lines: &[SourceLine]) -> ShownFinding {
    let speedup = la.findings.iter().find(|r| r.category == f.category).and_then(|r| r.estimated_speedup_pct);
    let source_lines = source::lines_for(f.category, lines);
    ShownFinding { origin, text_origin: None, finding: f, estimated_speedup_pct: speedup, source_lines }
}

fn placeholder() -> Finding {
    Finding {
        category: rules::Category::LatencyBound,
        severity: rules::Severity::Info,
        claim: String::new(),
        evidence: vec![],
        explanation: String::new(),
        suggestions: vec![],
    }
}

/// Re-exported for the CLI: the kernels of one profile, analysed without the model.
pub fn analyse(p: &Profile) -> analysis::FileAnalysis {
    analysis::analyse_profile(p)
}

/// Errors of files that could not be read, for reports.
pub fn file_error(path: PathBuf, message: String) -> FileError {
    FileError { path, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings_stop_at_numbers_and_punctuation() {
        assert_eq!(opening("Global loads are uncoalesced: 4 of 32 bytes.", 3), "Global loads are");
        assert_eq!(opening("Memory-bound: DRAM is at 64.5% of peak.", 3), "");
        assert_eq!(opening("The grid has 96 blocks for 132 SMs.", 3), "The grid has");
        assert_eq!(opening("Make consecutive, aligned accesses.", 3), "Make consecutive");
        assert_eq!(opening("12.5% of branch targets diverge.", 3), "");
    }

    #[test]
    fn expert_text_splits_into_sentences() {
        let s =
            sentences("The memory system moves whole 32-byte sectors; most of them carry no useful bytes. That traffic competes for DRAM.");
        assert_eq!(
            s,
            vec![
                "The memory system moves whole 32-byte sectors.".to_string(),
                "Most of them carry no useful bytes.".to_string(),
                "That traffic competes for DRAM.".to_string()
            ]
        );
        // A decimal point is not a sentence end.
        assert_eq!(sentences("Warps use 12.5 of 32 lanes on average.").len(), 1);
    }

    #[test]
    fn a_paragraph_keeps_its_passing_first_sentences() {
        let paragraph = "The DRAM is the bottleneck, at 64.5% of peak. The SM adds to the time at 8.99%. So it is slow.";
        let no_sm = |t: &str| !t.contains("8.99%");
        assert_eq!(
            passing_prefix(paragraph, no_sm),
            Some((
                "The DRAM is the bottleneck, at 64.5% of peak.".to_string(),
                "The SM adds to the time at 8.99%. So it is slow.".to_string()
            ))
        );
        // The first sentence fails: nothing to keep; one sentence: nothing to cut.
        assert_eq!(passing_prefix("The SM adds 8.99%. The DRAM is busy.", no_sm), None);
        assert_eq!(passing_prefix("The DRAM is the bottleneck.", |_| true), None);
    }
}
