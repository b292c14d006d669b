//! The run of the explain stage after the first pass (shared by `keet explain` and `keet merge`):
//! ranks the table's groups, re-reads the chosen representatives, and takes each chosen kernel
//! through its steps: known (a shard's findings) or cached → answered by the model
//! ([`super::concurrent`]) or by the rule layer → stored in the cache. Then the report is
//! assembled ([`super::assemble`]) and, with a model, the profile summary asked or read from the cache.

use super::assemble::{self, ReportParts};
use super::model::{Model, ModelSlot, ModelSource};
use super::report::*;
use super::rule_answer::{rules_only, verdict};
use super::{code, concurrent, decoding, prompt, schema, source, summary};
use super::{ExplainError, ExplainOptions, ProseMode, RunStats};
use crate::analysis::{self, FileError, LaunchAnalysis};
use crate::batch::{BatchTable, Rep};
use crate::cache::{Cache, CacheKey};
use crate::rules;
use std::path::PathBuf;
use std::time::Instant;

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

/// The batch after the first pass, and what is already known about it.
pub struct Batch<'a> {
    /// The inputs as given (the report lists them).
    pub inputs: &'a [PathBuf],
    pub table: BatchTable,
    /// Files that could not be read.
    pub errors: Vec<FileError>,
    /// Every file's set members, when the scan read them (`None`: the sets re-read the files).
    pub members: Option<Vec<crate::sets::Member>>,
    pub model: ModelSource,
    /// Findings shards already made (`keet merge`); empty for `keet explain`.
    pub known: &'a KnownFindings,
    /// When the run began (for the timings).
    pub started: Instant,
}

/// What the run carries from kernel to kernel: the options, the cache, the model and the counts.
struct Run<'a> {
    opts: &'a ExplainOptions,
    /// Findings shards already made (`keet merge`).
    known: &'a KnownFindings,
    /// The user's `--source` code, read once.
    user_code: Vec<keet_code::CodeFile>,
    cache: Option<Cache>,
    model: ModelSlot,
    stats: RunStats,
    started: Instant,
}

/// A chosen kernel before the model: its analysis, source lines, code, cache key and what a shard
/// or the cache already holds for it.
struct Prepared {
    la: LaunchAnalysis,
    source_lines_all: Vec<SourceLine>,
    located: Option<Result<code::Located, String>>,
    key: CacheKey,
    /// Findings a shard or the cache holds, the cache entry's id, and whether they came from a cache.
    cached: Option<(CachedFindings, Option<i64>, bool)>,
    to_model: bool,
}

/// The kernels chosen from the table: their entries with their groups, how many were left out,
/// and the batch's total time.
struct Chosen {
    kernels: Vec<(usize, KernelGroup)>,
    skipped: usize,
    total_ns: f64,
}

/// The explain stage after the first pass (shared by `keet explain` and `keet merge`): ranks the
/// table's groups, re-reads the chosen representatives, explains them (`known` findings first,
/// then the cache, then the model or the rule layer) and assembles the report.
pub fn explain_table(batch: Batch<'_>, opts: &ExplainOptions) -> Result<(ExplainReport, RunStats), ExplainError> {
    let Batch { inputs, mut table, errors, members, model, known, started } = batch;
    let chosen = choose(&table, opts);
    let entries: Vec<usize> = chosen.kernels.iter().map(|k| k.0).collect();
    let reps = crate::batch::load_reps(&table, &entries).map_err(|e| ExplainError::Io(e.to_string()))?;
    let parse_s = started.elapsed().as_secs_f64();
    let cache = match &opts.run.cache {
        Some(p) => Cache::open_or_skip(p)?,
        None => None,
    };
    let stats = RunStats { parse_s, ..RunStats::default() };
    let mut run = Run { opts, known, user_code: user_code(opts), cache, model: ModelSlot::new(model), stats, started };
    // What each chosen kernel is, and whether a shard or the cache already holds its findings.
    let mut prepared: Vec<Prepared> = Vec::with_capacity(chosen.kernels.len());
    for (rank, ((entry, group), loaded)) in chosen.kernels.iter().zip(&reps).enumerate() {
        let p = run.prepare(rank, &table, *entry, group, loaded)?;
        table.groups[*entry].analysis_key = Some(p.key.to_string());
        prepared.push(p);
    }
    // The model's answers for the kernels neither known nor cached (several at once with --concurrency).
    let mut answers = run.ask_model(&prepared, &chosen.kernels, &reps)?;
    let mut kernels = Vec::with_capacity(prepared.len());
    for (rank, (((_entry, group), loaded), p)) in chosen.kernels.iter().zip(&reps).zip(prepared).enumerate() {
        kernels.push(run.explained(rank, group, &loaded.launch, p, answers[rank].take())?);
    }
    run.stats.total_s = started.elapsed().as_secs_f64();
    let model = run.model.info(&opts.run);
    let prose_mode = model.as_ref().map(|_| opts.settings.prose.as_str().to_string());
    let mut report = assemble::build_report(ReportParts {
        inputs: inputs.to_vec(),
        model,
        total_duration_ns: chosen.total_ns,
        kernels,
        skipped_kernels: chosen.skipped,
        errors,
        settings: opts.settings.clone(),
        table,
        prose_mode,
    });
    run.add_summary(&mut report)?;
    super::set_summary::add_sets(&mut report, members, &mut run.model, run.cache.as_ref(), opts, &mut run.stats)?;
    run.stats.total_s = started.elapsed().as_secs_f64();
    Ok((report, run.stats))
}

/// Ranks the table's groups and chooses those that make up the coverage, at most `top`.
fn choose(table: &BatchTable, opts: &ExplainOptions) -> Chosen {
    let (ranked, total_ns) = table.ranked();
    // Only what choosing needs: the time and share of each group (no file lists yet).
    let shares = ranked.iter().map(|&(_, t)| (t, if total_ns > 0.0 { 100.0 * t / total_ns } else { 0.0 }));
    let n_chosen = crate::batch::chosen_count(shares, opts.settings.coverage_pct, opts.settings.top);
    let skipped = ranked.len() - n_chosen;
    let kernels = ranked[..n_chosen].iter().map(|&(e, _)| (e, table.kernel_group(e, total_ns))).collect();
    Chosen { kernels, skipped, total_ns }
}

impl Run<'_> {
    /// One chosen kernel before the model: analysed, its source lines and code found, its cache key
    /// made, and what a shard or the cache holds for it looked up.
    fn prepare(
        &mut self,
        rank: usize,
        table: &BatchTable,
        entry: usize,
        group: &KernelGroup,
        loaded: &Rep,
    ) -> Result<Prepared, ExplainError> {
        let opts = self.opts;
        let launch = &loaded.launch;
        let rep = table.groups[entry].rep;
        let la = analysis::analyse_launch_in(launch, Some(group.time_share_pct));
        let source_lines_all = source::hot_lines_with(launch, &opts.settings.source_files, &loaded.code);
        let located = opts.settings.edit.then(|| kernel_code(&la, &loaded.code, &self.user_code));
        self.stats.kernels_with_code += usize::from(matches!(located, Some(Ok(_))));
        let code_key = located.as_ref().map(|l| code::code_sha256(l.as_ref().ok())).unwrap_or_default();
        let key = cache_key(&la, self.model.sha.as_deref().unwrap_or("none"), &source_lines_all, &code_key, opts.settings.prose);
        let shard_made = self.known.get(&(table.files[rep.file as usize].clone(), rep.index)).filter(|k| k.key == key.as_str());
        let mut cached = match shard_made {
            Some(k) => {
                let id = match &self.cache {
                    Some(c) => c.get(&key)?.map(|e| e.id),
                    None => None,
                };
                Some((k.found.clone(), id, k.cached))
            }
            None => self.cached_answer(&key)?,
        };
        let to_model = self.opts.model_ranks.as_ref().is_none_or(|r| r.contains(&(rank + 1)));
        if !to_model {
            cached = None;
        }
        Ok(Prepared { la, source_lines_all, located, key, cached, to_model })
    }

    /// The findings the cache holds under `key` (none with `--refresh`).
    fn cached_answer(&self, key: &CacheKey) -> Result<Option<(CachedFindings, Option<i64>, bool)>, ExplainError> {
        if let (Some(c), false) = (&self.cache, self.opts.run.refresh) {
            if let Some(e) = c.get(key)? {
                if let Ok(cf) = serde_json::from_str::<CachedFindings>(&e.findings_json) {
                    return Ok(Some((cf, Some(e.id), true)));
                }
            }
        }
        Ok(None)
    }

    /// Loads the model when a chosen kernel needs it and asks about those kernels ([`concurrent`]):
    /// the answers by rank, `None` where the model was not asked.
    fn ask_model(
        &mut self,
        prepared: &[Prepared],
        chosen: &[(usize, KernelGroup)],
        reps: &[Rep],
    ) -> Result<Vec<Option<CachedFindings>>, ExplainError> {
        let mut answers: Vec<Option<CachedFindings>> = (0..prepared.len()).map(|_| None).collect();
        if self.model.sha.is_none() {
            return Ok(answers);
        }
        // Nothing the rule layer can support: the model would have nothing to cite.
        let wanted: Vec<usize> = (0..prepared.len())
            .filter(|&i| prepared[i].cached.is_none() && prepared[i].to_model && !prepared[i].la.findings.is_empty())
            .collect();
        if wanted.is_empty() {
            return Ok(answers);
        }
        self.model.load(&self.opts.run, &mut self.stats)?;
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
        let Model { engine, info } = self.model.loaded.take().expect("model loaded above");
        let (engine, found) = concurrent::answer_all(engine, &jobs, prepared.len(), self.opts, &mut self.stats)?;
        self.model.loaded = Some(Model { engine, info });
        for (i, f) in wanted.into_iter().zip(found) {
            answers[i] = Some(f);
        }
        Ok(answers)
    }

    /// One chosen kernel explained: its findings as known, cached, the model's `answer` or the
    /// rule layer's, its code section, and the cache entry made for a new answer.
    fn explained(
        &mut self,
        rank: usize,
        group: &KernelGroup,
        launch: &crate::profile::Launch,
        p: Prepared,
        answer: Option<CachedFindings>,
    ) -> Result<KernelExplanation, ExplainError> {
        let Prepared { la, source_lines_all, located, key, cached, to_model } = p;
        let (mut found, cache_id, from_cache) = match cached {
            Some((cf, id, from_cache)) => {
                self.stats.kernels_from_cache += usize::from(from_cache);
                (cf, id, from_cache)
            }
            // Without an answer (no model, not asked, or nothing the rule layer can support for the
            // model to cite): the rule layer's findings.
            None => (answer.unwrap_or_else(|| rules_only(launch, &la, &source_lines_all)), None, false),
        };
        if found.code.is_none() {
            let why = if la.findings.is_empty() {
                "the rule layer found no problem to fix"
            } else if self.model.sha.is_none() {
                "no model (--no-llm): keet proposes edits with a model"
            } else {
                "the model was not asked about this kernel"
            };
            found.code = located.as_ref().map(|l| code::section_without_edit(l, why));
        }
        if self.stats.first_finding_s.is_none() {
            self.stats.first_finding_s = Some(self.started.elapsed().as_secs_f64());
        }
        self.stats.kernels_explained += 1;
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
        if let (false, None, true) = (from_cache, cache_id, to_model) {
            k.cache_id = self.store(&key, &k, &found)?;
        }
        Ok(k)
    }

    /// Stores a new answer in the cache (when there is one): its findings, and the kernel's report
    /// alone for `keet show`. The entry's id.
    fn store(&self, key: &CacheKey, k: &KernelExplanation, found: &CachedFindings) -> Result<Option<i64>, ExplainError> {
        let Some(c) = &self.cache else { return Ok(None) };
        let model = self.model.loaded.as_ref();
        let alone = assemble::kernel_alone(k, model.map(|m| m.info.clone()), model.map(|_| self.opts.settings.prose.as_str().to_string()));
        let meta = crate::cache::EntryMeta {
            file: k.kernel.files.first().map(|p| p.display().to_string()).unwrap_or_default(),
            kernel: k.kernel.name.clone(),
            model: model.map(|m| m.info.name.clone()).unwrap_or_else(|| "rules only".into()),
            verdict: found.verdict.clone(),
        };
        let findings_json = serde_json::to_string(found).expect("findings serialise");
        let report_json = serde_json::to_string(&alone).expect("report serialises");
        Ok(Some(c.put(key, &meta, &findings_json, &report_json)?))
    }

    /// With a model, at least two kernels explained and `summary` asked for: the profile summary.
    fn add_summary(&mut self, report: &mut ExplainReport) -> Result<(), ExplainError> {
        if self.model.sha.is_none() || report.kernels.len() < 2 || !self.opts.summary {
            return Ok(());
        }
        report.summary = Some(self.profile_summary(report)?);
        if report.model.is_none() {
            report.model = self.model.loaded.as_ref().map(|m| m.info.clone());
        }
        Ok(())
    }

    /// The profile summary: from the cache when the same facts, model and prompts made one, else asked
    /// of the model (then cached).
    fn profile_summary(&mut self, report: &ExplainReport) -> Result<ProfileSummary, ExplainError> {
        let opts = self.opts;
        let facts = summary::summary_facts(report);
        let model_sha256 = self.model.sha.as_deref().expect("a summary only with a model");
        let key = summary::cache_key(&facts, "summary-v1", summary::SUMMARY, model_sha256, opts);
        if let Some(found) = summary::cached(self.cache.as_ref(), &key, opts)? {
            return Ok(found);
        }
        let m = self.model.load(&opts.run, &mut self.stats)?;
        let tg = Instant::now();
        if opts.run.progress {
            eprintln!("keet: asking {} for the profile summary ...", m.info.name);
        }
        let found =
            summary::summarize(&mut m.engine, &facts, prompt::system(opts.settings.prose.as_str())?, opts.settings.repair_attempts)?;
        self.stats.generate_s += tg.elapsed().as_secs_f64();
        if opts.run.progress {
            eprintln!("keet: summary done in {:.1} s", tg.elapsed().as_secs_f64());
        }
        if let Some(c) = &self.cache {
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
}

/// The user's `--source FILE|DIR` code, read once per run; warnings (a file not UTF-8, huge or
/// unparsable) go to stderr and the explanation goes on without that file.
fn user_code(opts: &ExplainOptions) -> Vec<keet_code::CodeFile> {
    if !opts.settings.edit {
        return Vec::new();
    }
    let (files, warnings) = code::read_user_code(&opts.settings.source_files);
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

/// The cache key of one kernel analysis: its facts and identity, the model, the prompt templates,
/// the decoding settings and keet's version.
/// `code_sha256` identifies the kernel's code the model was shown (empty when none).
pub fn cache_key(la: &LaunchAnalysis, model_sha256: &str, source_lines: &[SourceLine], code_sha256: &str, mode: ProseMode) -> CacheKey {
    let code = if code_sha256.is_empty() { String::new() } else { format!("{code_sha256}\0{}", code::files_sha256()) };
    let facts_json = serde_json::to_string(&(&la.name, &la.block_size, &la.grid_size, &la.facts, &la.findings, source_lines, code))
        .expect("facts serialise");
    let decoding_json = serde_json::to_string(&(decoding(), schema::CLAIM_MAX_CHARS, "findings-v14", mode)).expect("options serialise");
    CacheKey::new(&crate::cache::KeyParts {
        facts_json: &facts_json,
        model_sha256,
        prompt_templates_sha256: &prompt::templates_sha256(),
        decoding_json: &decoding_json,
        keet_version: env!("CARGO_PKG_VERSION"),
    })
}
