//! `keet bench explain`: time to first finding, seconds per kernel with the model, the warm-cache
//! time of the same run, and for each prose mode (`--prose free,guided,choose`) how many model
//! sentences were shown, re-asked and replaced (the share shown), how many shown sentences carry a
//! number that is not the kernel's own or fail the prose gate when checked again (both must be 0),
//! with five sample sentences. `--corpus DIR` runs every profile in the corpus's MANIFEST.tsv.
//! `--concurrency 1,2,4,8` instead explains all the profiles as one batch once per number of
//! kernels answered at once, and reports kernels per hour and seconds per kernel for each, with
//! whether the findings are the same.

use super::args::ModelArgs;
use crate::explain::report::{ExplainReport, Writer};
use crate::explain::{self, ExplainOptions, ProseMode, ReportSettings, RunOptions};
use crate::mechanism::SentenceKind;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct ExplainBenchArgs {
    /// Profiles to explain (default: the H200 decode report of ../shared/corpus).
    pub profiles: Vec<PathBuf>,
    /// Every profile listed in DIR/MANIFEST.tsv (e.g. ../shared/corpus), after PROFILES.
    #[arg(long, value_name = "DIR")]
    pub corpus: Option<PathBuf>,
    /// Kernels to explain per profile.
    #[arg(long, default_value_t = 3)]
    pub top: usize,
    /// Prose modes to run, each over all profiles (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = vec![ProseMode::default()])]
    pub prose: Vec<ProseMode>,
    /// Write every shown sentence of the model (mode, profile, kernel, category, field, writer,
    /// text) to FILE as tab-separated lines, for an expert to read.
    #[arg(long, value_name = "FILE")]
    pub sentences: Option<PathBuf>,
    /// Keep the analysis cache of the (last) cold run in FILE, e.g. for `KEET_CACHE=FILE keet eval
    /// --top N` to ask about the same explanations without explaining again.
    #[arg(long, value_name = "FILE")]
    pub keep_cache: Option<PathBuf>,
    /// Numbers of kernels answered at once (comma-separated): one cold batch run of all the
    /// profiles (`--top` kernels each) per number, alternating with nothing cached.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub concurrency: Vec<usize>,
    /// With --concurrency: print the runs as JSON, `{"runs": [{"concurrency", "kernels_per_hour",
    /// "s_per_kernel", ...}], ...}`.
    #[arg(long, requires = "concurrency")]
    pub json: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// One `--concurrency` run: the batch explained with `concurrency` kernels answered at once.
#[derive(serde::Serialize)]
struct ConcurrencyRun {
    concurrency: usize,
    kernels_asked: usize,
    /// Seconds from the first question to the last answer (model load and parsing excluded).
    model_s: f64,
    kernels_per_hour: f64,
    s_per_kernel: f64,
    /// Whether the findings equal the first run's (they must: answers are decoded exactly as alone).
    same_findings: bool,
}

/// `--concurrency`: the profiles as one batch, once per number of kernels answered at once.
fn concurrency_runs(a: &ExplainBenchArgs, profiles: &[PathBuf], load: &dyn Fn() -> String) -> anyhow::Result<i32> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let load_start = load();
    let (mut runs, mut first): (Vec<ConcurrencyRun>, Option<serde_json::Value>) = (Vec::new(), None);
    for &concurrency in &a.concurrency {
        let dir = tempfile::tempdir()?;
        let opts = ExplainOptions {
            settings: ReportSettings {
                top: a.top * profiles.len(),
                coverage_pct: 100.0,
                prose: a.prose.first().copied().unwrap_or_default(),
                ..ReportSettings::default()
            },
            summary: false,
            run: RunOptions {
                engine: a.model.engine_options(),
                cache: Some(dir.path().join("bench.sqlite3")),
                concurrency: concurrency.max(1),
                ..RunOptions::default()
            },
            ..ExplainOptions::default()
        };
        let (report, stats) = explain::explain(profiles, &opts)?;
        let findings = serde_json::to_value(report.kernels.iter().map(|k| (&k.findings, &k.code)).collect::<Vec<_>>())?;
        let same_findings = *first.get_or_insert_with(|| findings.clone()) == findings;
        let model_s = (stats.total_s - stats.model_load_s - stats.parse_s).max(1e-9);
        let asked = stats.kernels_asked;
        runs.push(ConcurrencyRun {
            concurrency,
            kernels_asked: asked,
            model_s,
            kernels_per_hour: asked as f64 * 3600.0 / model_s,
            s_per_kernel: model_s / asked.max(1) as f64,
            same_findings,
        });
        eprintln!("keet bench explain: concurrency {concurrency}: {asked} kernels in {model_s:.1} s");
    }
    let load_end = load();
    if a.json {
        let out = serde_json::json!({ "runs": runs, "cpu": cpu, "load_average_start": load_start, "load_average_end": load_end,
            "profiles": profiles, "top": a.top, "threads": crate::llm::threads::configure(a.model.threads) });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    println!("{cpu}; load average {load_start} at start, {load_end} at end");
    println!("{:>11} {:>8} {:>10} {:>15} {:>13} {:>8}", "concurrency", "kernels", "model s", "kernels/hour", "s/kernel", "same");
    for r in &runs {
        println!(
            "{:>11} {:>8} {:>10.1} {:>15.1} {:>13.1} {:>8}",
            r.concurrency, r.kernels_asked, r.model_s, r.kernels_per_hour, r.s_per_kernel, r.same_findings
        );
    }
    Ok(if runs.iter().all(|r| r.same_findings) { 0 } else { 1 })
}

/// One sentence of a shown model finding: the kernel, the category, the field ("claim",
/// "explanation", "suggestion N"), who wrote it and the text, in report order.
pub struct SentenceRow {
    pub kernel: String,
    pub category: String,
    pub field: String,
    pub writer: Writer,
    pub text: String,
    /// What a sentence in the model's own words does (one row per sentence); `None` for others.
    pub kind: Option<SentenceKind>,
}

/// Every sentence of the report's model findings (rule findings carry no text origin).
pub fn sentence_rows(report: &ExplainReport) -> Vec<SentenceRow> {
    let mut out = Vec::new();
    for k in &report.kernels {
        for f in &k.findings {
            let Some(to) = &f.text_origin else { continue };
            let row = |field: String, writer: Writer, text: &str, kind: Option<SentenceKind>| SentenceRow {
                kernel: k.kernel.name.clone(),
                category: f.finding.category.as_str().to_string(),
                field,
                writer,
                text: text.to_string(),
                kind,
            };
            let mut fields =
                vec![("claim".to_string(), to.claim, &f.finding.claim), ("explanation".into(), to.explanation, &f.finding.explanation)];
            fields.extend(
                f.finding.suggestions.iter().zip(&to.suggestions).enumerate().map(|(n, (s, w))| (format!("suggestion {}", n + 1), *w, s)),
            );
            for (field, writer, text) in fields {
                let kinds: Vec<_> = to.kinds.iter().filter(|x| x.field == field).collect();
                if writer != Writer::Expert && !kinds.is_empty() {
                    out.extend(kinds.iter().map(|x| row(field.clone(), writer, &x.text, Some(x.kind))));
                } else {
                    out.push(row(field, writer, text, None));
                }
            }
        }
    }
    out
}

/// Sentences by `writer` shown in a report (the kernel's category, the text), in report order.
pub fn sentences_by(report: &ExplainReport, writer: Writer) -> Vec<(String, String)> {
    sentence_rows(report).into_iter().filter(|r| r.writer == writer).map(|r| (r.category, r.text)).collect()
}

/// What the model's own sentences do (names code, links facts, restates, general), as shares of all
/// of them, and how many kernels have at least one linked sentence.
fn print_kinds(reports: &[ExplainReport]) {
    let all: Vec<SentenceRow> = reports.iter().flat_map(sentence_rows).filter(|r| r.kind.is_some()).collect();
    for (who, own_only) in [("all shown model sentences (own words and chosen)", false), ("the model's own words", true)] {
        let rows: Vec<&SentenceRow> = all.iter().filter(|r| !own_only || r.writer == Writer::Model).collect();
        print_kind_shares(who, &rows);
    }
}

fn print_kind_shares(who: &str, rows: &[&SentenceRow]) {
    let total = rows.len().max(1) as f64;
    let shares: Vec<String> = SentenceKind::ALL
        .iter()
        .map(|k| {
            let n = rows.iter().filter(|r| r.kind == Some(*k)).count();
            format!("{} {n} ({:.1}%)", k.as_str(), 100.0 * n as f64 / total)
        })
        .collect();
    println!("{who}, by what they do: {} of {}", shares.join(", "), rows.len());
    let kernels: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.kernel.as_str()).collect();
    let linked: std::collections::BTreeSet<&str> =
        rows.iter().filter(|r| matches!(r.kind, Some(SentenceKind::Links | SentenceKind::NamesCode))).map(|r| r.kernel.as_str()).collect();
    println!("kernels with a linked sentence: {} of {} with model sentences", linked.len(), kernels.len());
}

/// Model sentences kept from the reader, counted by the check that refused them (the first words of
/// each reason, e.g. "it joins", "it calls the kernel", "it only restates").
fn print_refusals(reports: &[ExplainReport]) {
    let mut by_check: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for r in reports.iter().flat_map(|r| &r.kernels).flat_map(|k| &k.replaced) {
        for reason in &r.reasons {
            let reason = reason.trim_start_matches("re-asked: ");
            // "in the explanation, it uses words ...": the check, not the field.
            let reason = match reason.strip_prefix("in the ").and_then(|r| r.split_once(", ")) {
                Some((_field, check)) => check,
                None => reason,
            };
            let check: String = reason.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
            *by_check.entry(check).or_default() += 1;
        }
    }
    let mut v: Vec<(String, usize)> = by_check.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let list: Vec<String> = v.iter().take(12).map(|(c, n)| format!("\"{c} ...\" {n}")).collect();
    println!("refusal reasons, by check (first words): {}", if list.is_empty() { "none".into() } else { list.join(", ") });
}

pub fn run(a: ExplainBenchArgs) -> anyhow::Result<i32> {
    let profiles = profiles_of(&a)?;
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "unknown".into())
    };
    if !a.concurrency.is_empty() {
        return concurrency_runs(&a, &profiles, &load);
    }
    println!("{} profiles; load average at start: {}", profiles.len(), load());
    // Written as each profile finishes, so a long run can be read while it goes on.
    let mut sentence_file = sentence_file(&a)?;
    for &mode in &a.prose {
        let dir = tempfile::tempdir()?;
        let opts = ExplainOptions {
            settings: ReportSettings { top: a.top, prose: mode, ..ReportSettings::default() },
            run: RunOptions { engine: a.model.engine_options(), cache: Some(dir.path().join("bench.sqlite3")), ..RunOptions::default() },
            ..ExplainOptions::default()
        };
        // Each profile on its own, so --top applies per profile.
        let run = explain_each(&profiles, &opts, mode, &mut sentence_file)?;
        print_mode(mode, &run, &load);
        if let (Some(keep), Some(cache)) = (&a.keep_cache, &opts.run.cache) {
            std::fs::copy(cache, keep).map_err(|e| anyhow::anyhow!("--keep-cache {}: {e}", keep.display()))?;
            println!("analysis cache kept in:     {}", keep.display());
        }
    }
    if let Some(path) = &a.sentences {
        println!("model sentences written to {}", path.display());
    }
    Ok(0)
}

/// The profiles to explain: PROFILES, then the corpus's MANIFEST.tsv; the H200 decode report
/// when neither names any.
fn profiles_of(a: &ExplainBenchArgs) -> anyhow::Result<Vec<PathBuf>> {
    let mut profiles = a.profiles.clone();
    if let Some(dir) = &a.corpus {
        let manifest = dir.join("MANIFEST.tsv");
        let text = std::fs::read_to_string(&manifest).map_err(|e| anyhow::anyhow!("{}: {e}", manifest.display()))?;
        for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let file = line.split('\t').next().unwrap_or_default();
            profiles.push(dir.join(file));
        }
    }
    if profiles.is_empty() {
        profiles.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/h200-moe/decode_c1.ncu-rep"));
    }
    Ok(profiles)
}

/// `--sentences FILE`, created with its header line.
fn sentence_file(a: &ExplainBenchArgs) -> anyhow::Result<Option<std::fs::File>> {
    match &a.sentences {
        Some(path) => {
            let mut file = std::fs::File::create(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            writeln!(file, "mode\tprofile\tkernel\tcategory\tfield\twriter\tkind\ttext")?;
            Ok(Some(file))
        }
        None => Ok(None),
    }
}

/// One prose mode's run over every profile: the cold reports and what the cold and warm runs took.
#[derive(Default)]
struct ModeRun {
    reports: Vec<ExplainReport>,
    cold_s: f64,
    warm_s: f64,
    load_s: f64,
    parse_s: f64,
    /// Seconds to the first finding of the first profile that had one.
    first_finding_s: Option<f64>,
    kernels: usize,
    /// Kernels the warm runs took from the cache.
    from_cache: usize,
    /// Whether a warm run loaded the model (it should not: every answer is cached).
    loaded_warm: bool,
    /// Whether every warm run's findings equal the cold run's.
    same: bool,
    /// The cold runs' stats, summed.
    cold_stats: explain::RunStats,
}

/// Explains each profile on its own twice (cold, then warm from the cache), printing a line per
/// profile and writing its shown sentences to `sentence_file`.
fn explain_each(
    profiles: &[PathBuf],
    opts: &ExplainOptions,
    mode: ProseMode,
    sentence_file: &mut Option<std::fs::File>,
) -> anyhow::Result<ModeRun> {
    let mut run = ModeRun { same: true, ..ModeRun::default() };
    for p in profiles {
        let inputs = vec![p.clone()];
        let t = Instant::now();
        let (cold, s1) = explain::explain(&inputs, opts)?;
        run.cold_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (warm, s2) = explain::explain(&inputs, opts)?;
        run.warm_s += t.elapsed().as_secs_f64();
        run.same &= serde_json::to_value(cold.kernels.iter().map(|k| &k.findings).collect::<Vec<_>>())?
            == serde_json::to_value(warm.kernels.iter().map(|k| &k.findings).collect::<Vec<_>>())?;
        run.load_s += s1.model_load_s;
        run.parse_s += s1.parse_s;
        run.first_finding_s = run.first_finding_s.or(s1.first_finding_s);
        run.kernels += s1.kernels_explained;
        run.from_cache += s2.kernels_from_cache;
        run.loaded_warm |= s2.model_load_s > 0.0;
        run.cold_stats.absorb(&s1);
        println!(
            "  {}: {} kernels, {} asked the model, sentences shown/re-asked/replaced {}/{}/{}, {:.1} s",
            p.display(),
            s1.kernels_explained,
            s1.kernels_asked,
            s1.prose.shown,
            s1.prose.reasked,
            s1.prose.replaced,
            s1.total_s
        );
        if let Some(file) = sentence_file {
            write_sentences(file, mode, p, &cold)?;
        }
        run.reports.push(cold);
    }
    Ok(run)
}

/// The report's shown sentences, one tab-separated line each, then its replaced ones.
fn write_sentences(file: &mut std::fs::File, mode: ProseMode, profile: &Path, report: &ExplainReport) -> anyhow::Result<()> {
    let one_line = |t: &str| t.replace(['\t', '\n'], " ");
    for r in sentence_rows(report) {
        let writer = serde_json::to_value(r.writer)?.as_str().unwrap_or_default().to_string();
        let kind = r.kind.map(|k| k.as_str()).unwrap_or("-");
        let fields = [mode.as_str(), &profile.display().to_string(), &r.kernel, &r.category, &r.field, &writer, kind, &r.text];
        writeln!(file, "{}", fields.map(one_line).join("\t"))?;
    }
    // The sentences the gate kept from the reader, so a run shows what was refused and why: the
    // writer column says "replaced" and the text holds each try, then the reasons.
    for k in &report.kernels {
        for r in &k.replaced {
            let text = format!("{} || reasons: {}", r.texts.join(" || "), r.reasons.join("; "));
            let fields =
                [mode.as_str(), &profile.display().to_string(), &k.kernel.name, r.category.as_str(), &r.field, "replaced", "-", &text];
            writeln!(file, "{}", fields.map(one_line).join("\t"))?;
        }
    }
    file.flush()?;
    Ok(())
}

/// One prose mode's figures: times, kernels per minute, the model's findings and sentences (shown,
/// re-asked, replaced), five samples, and the warm run.
fn print_mode(mode: ProseMode, run: &ModeRun, load: &dyn Fn() -> String) {
    let (reports, kernels, s1_all) = (&run.reports, run.kernels, &run.cold_stats);
    let gen_s = (run.cold_s - run.load_s - run.parse_s).max(1e-9);
    let c = s1_all.prose;
    let written = c.shown + c.replaced;
    let pct = |n: usize| if written > 0 { 100.0 * n as f64 / written as f64 } else { 0.0 };
    println!();
    println!("prose mode: {}", mode.as_str());
    println!("model: {}", reports[0].model.as_ref().map(|m| format!("{} on {}", m.name, m.device)).unwrap_or_else(|| "none".into()));
    println!("kernels explained:          {kernels}");
    println!("model load:                 {:.2} s", run.load_s);
    println!("time to first finding:      {:.2} s", run.first_finding_s.unwrap_or(0.0));
    println!("cold run total:             {:.2} s", run.cold_s);
    println!("kernels per minute (model): {:.2}", kernels as f64 * 60.0 / gen_s);
    if s1_all.kernels_asked > 0 {
        println!(
            "seconds per kernel (model): {:.1} ({} kernels asked)",
            s1_all.generate_s / s1_all.kernels_asked as f64,
            s1_all.kernels_asked
        );
    }
    println!(
        "model findings shown / repaired / dropped: {} / {} / {}",
        s1_all.llm_findings_shown, s1_all.llm_findings_repaired, s1_all.llm_findings_dropped
    );
    println!(
        "model sentences shown / re-asked / replaced: {} / {} / {} (gate pass rate {:.1}%, first try {:.1}%)",
        c.shown,
        c.reasked,
        c.replaced,
        pct(c.shown),
        pct(written.saturating_sub(c.reasked))
    );
    println!("share of model sentences shown: {:.1}% (target >= 80%)", pct(c.shown));
    println!("shown with an ungrounded number: {} (target 0)", s1_all.shown_ungrounded);
    println!("shown but flagged by the prose gate: {} (target 0)", s1_all.shown_gate_flagged);
    let with_text = reports.iter().flat_map(|r| &r.kernels).filter(|k| k.prose.shown > 0).count();
    println!("kernels with model text:    {with_text} of {kernels}");
    let samples: Vec<(String, String)> = reports.iter().flat_map(|r| sentences_by(r, Writer::Model)).collect();
    let chosen = reports.iter().map(|r| sentences_by(r, Writer::ModelChosen).len()).sum::<usize>();
    println!("shown, by writer:           {} written by the model, {chosen} expert sentences the model chose or copied", samples.len());
    println!("share shown in the model's own words: {:.1}%", pct(samples.len()));
    print_kinds(reports);
    print_refusals(reports);
    // Five samples spread over the run.
    let step = (samples.len() / 5).max(1);
    for (c, s) in samples.iter().step_by(step).take(5) {
        println!("  sample [{c}]: {s}");
    }
    println!(
        "warm-cache run:             {:.3} s ({} of {kernels} kernels from the cache, model loaded: {})",
        run.warm_s, run.from_cache, run.loaded_warm
    );
    println!("warm output identical:      {}", run.same);
    println!("load average at end:        {}", load());
}
