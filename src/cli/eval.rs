//! `keet eval PATH...`: multiple-choice questions with known answers from the profiles' raw
//! metrics, answered by the local model in each context format and each rotation of the options
//! with one constrained letter; prints circular accuracy with 95% intervals per question kind and
//! format, the share right per rotation, each format against the raw table (sign test), the letters
//! given and the cost. Writes the questions as JSONL for other models and
//! tools, and scores their answers (`--answers FILE.jsonl --questions FILE.jsonl`).

use crate::eval::peers::Format;
use crate::eval::{self, answer, score, Condition, EvalModel, EvalOptions};
use crate::llm::Engine;
use crate::render;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalFormat {
    Text,
    Json,
    /// The Markdown table (as in the README).
    Md,
}

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// `.ncu-rep` files, ncu CSV exports, or directories (searched recursively).
    #[arg(required_unless_present_any = ["answers", "twins"])]
    pub paths: Vec<PathBuf>,
    /// Sets of profiles instead of single profiles: the sets keet finds among PATHS (as `keet
    /// explain` does) ask which member is fastest, what bounds each member, where the busiest unit
    /// changes, which version step saved the most time and what it changed; formats raw, profiles
    /// (each member's context) and set (keet's set context) unless --formats says otherwise.
    #[arg(long, conflicts_with_all = ["twins", "answers"])]
    pub sets: bool,
    /// Real before/after fixes instead of profiles: a TOML file of `[[twin]]` tables (profile,
    /// kernel, good_kernel, category; optional good_profile, source, why; paths relative to the
    /// file). Each twin asks which change makes the slow kernel fastest, with its source in every
    /// format; with the explained format the model's own edits are scored against the real fixes.
    #[arg(long, value_name = "FILE.toml", conflicts_with_all = ["paths", "answers"])]
    pub twins: Option<PathBuf>,
    /// Kernels per profile to ask about (those that take the most time).
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Seeds, comma-separated: one question set per seed (distractors and the order of the options).
    #[arg(long, alias = "seed", value_delimiter = ',', default_value = "0,1")]
    pub seeds: Vec<u64>,
    /// Context formats to ask in, comma-separated: none (the question and the kernel's name only),
    /// raw (the metric table alone), generic (CUDA advice for no particular kernel, as long as
    /// context: the placebo), context (`explain --format context`), explained (keet's report with
    /// this model's own explanations), md (the full Markdown report).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none,raw,generic,context,explained")]
    pub formats: Vec<Condition>,
    /// Another tool's contexts as one more format, scored like keet's: NAME=FILE.jsonl with one
    /// {"id": ..., "context": ...} per question of --questions-out (same --top and --seeds).
    /// Repeatable. `scripts/perfdigest-contexts.sh` writes one with PerfDigest-MCP.
    #[arg(long = "context", value_name = "NAME=FILE.jsonl", value_parser = eval::peers::parse_arg, conflicts_with_all = ["answers", "twins"])]
    pub peer_contexts: Vec<(String, PathBuf)>,
    /// Rotations of each question's options: 4 asks every question with each option under each
    /// letter once and scores circular accuracy (right in all four); 1 asks the options as drawn
    /// (a quarter of the question tokens; the letter bias then stays in the score).
    #[arg(long, default_value_t = 4, value_parser = parse_rotations)]
    pub rotations: usize,
    /// How the model answers: letter (one of A-D) or text (the chosen option's text, word for
    /// word, decoded under a grammar that admits exactly the options: a small model's letter bias
    /// does not decide, and the answer is what a reader of the context would write), or
    /// likelihood (the option the model finds likeliest), or cloze (the question asked without its
    /// options, and the option whose text the model finds likeliest as its reply: the form
    /// OLMES and lm-eval-harness use for small models, with no order for a bias to follow).
    /// Default: cloze for profiles (the default 1.5B model reads its context but answers `B` to
    /// half of the lettered prompts: docs/evaluation.md); text with --sets, whose long contexts
    /// leave it answering one letter to most prompts; letter with --twins.
    #[arg(long, value_enum)]
    pub answer: Option<answer::AnswerBy>,
    /// Write the questions, their answers, the raw metrics each answer follows from, and the
    /// contexts, one JSON object per line.
    #[arg(long, value_name = "FILE")]
    pub questions_out: Option<PathBuf>,
    /// Only generate the questions (with --questions-out): no model is loaded.
    #[arg(long)]
    pub no_llm: bool,
    /// Score answers made elsewhere: one JSON object per line, {"id": ..., "format": ...,
    /// "answer": "A"-"D"}, for the questions of --questions. No model is loaded.
    #[arg(long, value_name = "FILE", requires = "questions", conflicts_with_all = ["paths", "no_llm", "questions_out"])]
    pub answers: Option<PathBuf>,
    /// The questions file (`--questions-out`) the answers of --answers are to.
    #[arg(long, value_name = "FILE", requires = "answers")]
    pub questions: Option<PathBuf>,
    /// Explained format: neither read nor write keet's analysis cache (default: explanations are
    /// cached as `keet explain` caches them).
    #[arg(long)]
    pub no_cache: bool,
    /// Output format: text (default), json (schema keet.eval/3, with every answer), md (the table).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<EvalFormat>,
    #[command(flatten)]
    pub output: super::args::OutputArgs,
    #[command(flatten)]
    pub model: super::args::ModelArgs,
    /// Threads for parsing (default: all cores).
    #[arg(long, short = 'j', default_value_t = 0)]
    pub jobs: usize,
    /// Kernels of a profile the model explains at once for the explained format: decoded
    /// together in one forward pass, each answer what it is alone (as `keet explain --concurrency`).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub concurrency: usize,
}

/// The formats `keet eval` asks in when `--formats` is not given (as its default value says).
fn default_formats() -> Vec<Condition> {
    vec![Condition::None, Condition::Raw, Condition::Generic, Condition::Context, Condition::Explained]
}

fn parse_rotations(s: &str) -> Result<usize, String> {
    match s.trim() {
        "1" => Ok(1),
        "4" => Ok(eval::ROTATIONS),
        _ => Err(format!("{s:?}: 1 (the options as drawn) or 4 (every rotation: circular evaluation)")),
    }
}

fn render_report(a: &EvalArgs, report: &eval::EvalReport) -> anyhow::Result<()> {
    let out = match a.format.unwrap_or(EvalFormat::Text) {
        EvalFormat::Json => render::json(report)?,
        EvalFormat::Text => render::render("eval.txt", report)?,
        EvalFormat::Md => render::render("eval.md", report)?,
    };
    a.output.write(&out)
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
fn bar(len: u64, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    b.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()).progress_chars("=> "));
    b
}

fn minutes(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else {
        format!("{:.1} min", s / 60.0)
    }
}

/// The explained format: runs keet's explain stage with the model on the asked-about kernels.
fn explain_first(
    a: &EvalArgs,
    set: &mut eval::EvalSet,
    opts: &EvalOptions,
    engine_opts: &crate::llm::EngineOptions,
    t0: Instant,
) -> anyhow::Result<()> {
    let plan = eval::explained_plan(set);
    let profiles = plan.len();
    let kernels: usize = plan
        .iter()
        .map(|(file, ranks)| match ranks {
            Some(r) => r.len(),
            None => set.sources.iter().filter(|s| &s.file == file && s.rank.is_some()).count(),
        })
        .sum();
    eprintln!("keet eval: explaining the {kernels} asked-about kernels of {profiles} profiles with the model first (the explained format)");
    let b = bar(profiles as u64, "explaining {pos}/{len} profiles [{bar:30}] {elapsed_precise} ETA {eta}");
    let cache = if a.no_cache { None } else { Some(crate::cache::default_cache_path()) };
    eval::add_explained(set, opts, engine_opts, cache, &mut |done, _| b.set_position(done as u64))
        .map_err(|e| anyhow::anyhow!("{e} (use --formats without explained, or --no-llm --questions-out FILE for the questions alone)"))?;
    b.finish_and_clear();
    eprintln!("keet eval: explained in {}", minutes(t0.elapsed().as_secs_f64()));
    Ok(())
}

/// The explained format of `--twins`: keet explain with the model and code edits on each twin's
/// slow kernel; returns how the model's edits compare with the real fixes.
fn explain_twins(
    a: &EvalArgs,
    set: &mut eval::EvalSet,
    twins: &[eval::twins::Twin],
    opts: &EvalOptions,
    engine_opts: &crate::llm::EngineOptions,
    t0: Instant,
) -> anyhow::Result<eval::twins::EditScore> {
    eprintln!("keet eval: explaining the {} twins' slow kernels with the model and their code first (the explained format)", twins.len());
    let b = bar(twins.len() as u64, "explaining {pos}/{len} twins [{bar:30}] {elapsed_precise} ETA {eta}");
    let cache = if a.no_cache { None } else { Some(crate::cache::default_cache_path()) };
    let score = eval::twins::add_explained(set, twins, opts, engine_opts, cache, &mut |done, _| b.set_position(done as u64))?;
    b.finish_and_clear();
    eprintln!("keet eval: explained in {}", minutes(t0.elapsed().as_secs_f64()));
    Ok(score)
}

/// Plans the prompts, says what they will cost, and answers every question in every format and
/// rotation (a progress bar on a terminal).
fn answer_all(a: &EvalArgs, set: &eval::EvalSet, engine: &mut Engine, formats: &[Format]) -> anyhow::Result<answer::AnswerRun> {
    let rotations = a.rotations;
    let plan = answer::plan_formats(set, engine, formats, rotations, answer_by(a))?;
    let rate = answer::prompt_rate(engine, 256)?;
    let to_run = plan.tokens_to_run();
    let option_tokens = plan.option_tokens_to_run();
    let by_rotation = plan.tokens_to_run_by_rotation();
    let expected_s = if rate > 0.0 { (to_run + option_tokens) as f64 / rate } else { f64::NAN };
    eprintln!(
        "keet eval: {} questions x {} formats x {} rotation{} with {} ({} threads): {} prompt tokens, {} of them reused from the context's KV state or answered already, {} to run ({} for rotation 0, {} for the other rotations), and {} option tokens to score, at about {:.0} tokens/s (warm-up): expected about {}",
        set.questions.len(),
        formats.len(),
        rotations,
        if rotations == 1 { "" } else { "s" },
        engine.info.name,
        engine.info.threads,
        plan.prompt_tokens(),
        plan.prompt_tokens() - to_run,
        to_run,
        by_rotation[0],
        by_rotation[1..].iter().sum::<usize>(),
        option_tokens,
        rate,
        minutes(expected_s)
    );
    let b = bar((to_run + option_tokens) as u64, "answering [{bar:30}] {percent}% of the tokens to run, {elapsed_precise} ETA {eta}");
    let run = answer::run(set, engine, &plan, false, &mut |done| b.set_position(done as u64))?;
    b.finish_and_clear();
    Ok(run)
}

pub fn run(a: EvalArgs) -> anyhow::Result<i32> {
    if let (Some(answers), Some(questions)) = (&a.answers, &a.questions) {
        return match score::score_files(questions, answers) {
            Ok(mut report) => {
                add_causes_from_file(questions, &mut report)?;
                render_report(&a, &report)?;
                Ok(0)
            }
            Err(e) => {
                eprintln!("error: {e}");
                Ok(2)
            }
        };
    }
    let t0 = Instant::now();
    let formats = chosen_formats(&a)?;
    let opts = EvalOptions { top: a.top, seeds: seeds(&a), jobs: a.jobs, concurrency: a.concurrency.max(1) };
    let (mut set, twins) = match &a.twins {
        Some(path) => {
            let built = eval::twins::build(path, &opts)?;
            (built.set, Some(built.twins))
        }
        None if a.sets => (eval::sets::build(&a.paths, &opts)?, None),
        None => (eval::build(&a.paths, &opts)?, None),
    };
    add_placebo(&a, &mut set);
    print_set_notes(&a, &set, &formats);
    if set.questions.is_empty() {
        eprintln!("error: no questions: the inputs' metrics answer none of keet eval's question kinds clearly (they need the SpeedOfLight, Occupancy, LaunchStats, WarpStateStats or MemoryWorkloadAnalysis sections)");
        if let Some(p) = &a.questions_out {
            super::write_output(Some(p), "")?;
        }
        return Ok(2);
    }
    if a.no_llm {
        return questions_only(&a, &set);
    }
    let mut all_formats: Vec<Format> = formats.iter().map(|c| Format::Keet(*c)).collect();
    for (name, path) in &a.peer_contexts {
        set.peers.push(eval::peers::read(name, path, &set.questions)?);
        all_formats.push(Format::Peer(set.peers.len() - 1, name.clone()));
    }
    let engine_opts = a.model.engine_options();
    let mut edits = None;
    if formats.contains(&Condition::Explained) {
        match &twins {
            Some(twins) => edits = Some(explain_twins(&a, &mut set, twins, &opts, &engine_opts, t0)?),
            None => explain_first(&a, &mut set, &opts, &engine_opts, t0)?,
        }
    }
    write_questions(&a, &set)?;
    let mut engine =
        Engine::load(&engine_opts).map_err(|e| anyhow::anyhow!("{e} (use --no-llm --questions-out FILE for the questions alone)"))?;
    let run = answer_all(&a, &set, &mut engine, &all_formats)?;
    let mut report = score_run(&a, &set, run, &all_formats, &formats, &engine, t0);
    report.edits = edits;
    render_report(&a, &report)?;
    Ok(if set.errors.is_empty() { 0 } else { 2 })
}

/// The seeds asked for, each run of equal seeds once.
fn seeds(a: &EvalArgs) -> Vec<u64> {
    let mut seeds = a.seeds.clone();
    seeds.dedup();
    seeds
}

/// The formats asked for, sorted and each once (`--sets` has its own defaults and formats).
fn chosen_formats(a: &EvalArgs) -> anyhow::Result<Vec<Condition>> {
    let mut formats = if a.sets { eval::sets::formats(&a.formats, &default_formats())? } else { a.formats.clone() };
    if !a.sets {
        eval::sets::refuse_set_formats(&formats)?;
    }
    formats.sort();
    formats.dedup();
    Ok(formats)
}

/// Adds the placebo (generic) format, as long as the context in the answering model's tokens.
fn add_placebo(a: &EvalArgs, set: &mut eval::EvalSet) {
    match super::token_counter(a.model.model.as_deref()) {
        Ok(count) => {
            eval::add_generic(set, count.as_ref());
            let tokens: usize = set.contexts.iter().map(|c| count(&c.context)).sum();
            if tokens == 0 {
                return; // --sets: no kernel context (its sizes are printed with the set notes)
            }
            eprintln!(
                "keet eval: {} contexts, {tokens} tokens of keet's context format in all ({} per context)",
                set.contexts.len(),
                tokens / set.contexts.len().max(1)
            );
        }
        Err(e) => eprintln!("note: the generic format is sized by an estimate of the tokens ({e:#})"),
    }
}

/// The set's errors, the profiles that gave no question, and with `--sets` the context sizes.
fn print_set_notes(a: &EvalArgs, set: &eval::EvalSet, formats: &[Condition]) {
    for e in &set.errors {
        eprintln!("error: {}", e.message);
    }
    for p in &set.without_questions {
        if a.sets {
            eprintln!("note: {}: in no set that gave a question", p.display());
        } else {
            eprintln!("note: {}: no question (its metrics answer none of keet eval's question kinds clearly)", p.display());
        }
    }
    if a.sets {
        if let Ok(count) = super::token_counter(a.model.model.as_deref()) {
            eprintln!("keet eval --sets: {}", eval::sets::context_tokens(set, formats, count.as_ref()));
        }
    }
}

/// `--answers`: where the questions file carries keet's context (as `--questions-out` writes it),
/// how it states each key and why the `context` format's wrong answers were wrong, as a run with
/// the model reports them.
fn add_causes_from_file(path: &std::path::Path, report: &mut score::EvalReport) -> anyhow::Result<()> {
    let questions = score::read_questions(path)?;
    let mut contexts: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for line in std::fs::read_to_string(path)?.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if let (Some(id), Some(context)) = (v["id"].as_str(), v["contexts"]["context"].as_str()) {
            contexts.insert(id.to_string(), context.to_string());
        }
    }
    if contexts.len() < questions.len() {
        return Ok(()); // not every question carries keet's context: nothing to classify against
    }
    let context_of = |q: &eval::Question| contexts.get(&q.id).cloned().unwrap_or_default();
    report.context_states = eval::causes::states(&questions, &context_of);
    if report.formats.iter().any(|f| f == Condition::Context.name()) {
        report.wrong_answer_causes = eval::causes::tally(&questions, &report.answers, Condition::Context.name(), &context_of);
    }
    Ok(())
}

/// `--no-llm`: how keet's context states each question's key, and the questions with
/// `--questions-out`.
fn questions_only(a: &EvalArgs, set: &eval::EvalSet) -> anyhow::Result<i32> {
    let context_of = |q: &eval::Question| set.contexts[q.context].context.clone();
    let rows = eval::causes::states(&set.questions, &context_of);
    let title = "How keet's context states each question's key (expert/eval.toml [statements]):";
    eprint!("{}", render::render("eval-states.txt", &serde_json::json!({ "rows": rows, "title": title }))?);
    write_questions(a, set)?;
    Ok(if set.errors.is_empty() { 0 } else { 2 })
}

/// `--questions-out FILE`: the questions as JSONL.
fn write_questions(a: &EvalArgs, set: &eval::EvalSet) -> anyhow::Result<()> {
    if let Some(p) = &a.questions_out {
        super::write_output(Some(p), &eval::jsonl(set))?;
        eprintln!("wrote {} questions to {}", set.questions.len(), p.display());
    }
    Ok(())
}

/// Scores the answers: per format, with the run's model, cost and time, and either the sets
/// scored against the profiles or how the context states each key (and, for the context format,
/// why answers were wrong).
fn score_run(
    a: &EvalArgs,
    set: &eval::EvalSet,
    run: answer::AnswerRun,
    all_formats: &[Format],
    formats: &[Condition],
    engine: &Engine,
    t0: Instant,
) -> score::EvalReport {
    let model = EvalModel { name: engine.info.name.clone(), device: engine.info.device.clone() };
    let keys: Vec<score::Key> = set.questions.iter().map(score::Key::from).collect();
    let format_names: Vec<String> = all_formats.iter().map(|f| f.name().to_string()).collect();
    let meta = score::ReportMeta {
        model: Some(model),
        answers_file: None,
        seeds: seeds(a),
        files: set.files.clone(),
        profiles_without_questions: set.without_questions.clone(),
        rotations: a.rotations,
        answer_by: Some(answer_by(a)),
        truncated_contexts: run.truncated,
        cost: run.costs,
        wall_s: Some(t0.elapsed().as_secs_f64()),
        errors: set.errors.clone(),
    };
    let mut report = score::report(&keys, run.answers, &format_names, meta);
    if a.sets {
        report.set_vs_profiles = eval::set_score::against_profiles(&keys, &report.answers, &format_names, a.rotations);
    } else {
        let context_of = |q: &eval::Question| set.contexts[q.context].context.clone();
        report.context_states = eval::causes::states(&set.questions, &context_of);
        if formats.contains(&Condition::Context) {
            report.wrong_answer_causes = eval::causes::tally(&set.questions, &report.answers, Condition::Context.name(), &context_of);
        }
    }
    report
}

/// How the model answers: `--answer`, else letters for single profiles and text for sets.
fn answer_by(a: &EvalArgs) -> answer::AnswerBy {
    a.answer.unwrap_or(if a.sets {
        answer::AnswerBy::Text
    } else if a.twins.is_some() {
        answer::AnswerBy::Letter
    } else {
        answer::AnswerBy::Cloze
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        eval: EvalArgs,
    }

    fn by(args: &[&str]) -> answer::AnswerBy {
        answer_by(&Probe::try_parse_from(args.iter().copied()).expect("arguments parse").eval)
    }

    #[test]
    fn sets_answer_with_text_and_single_profiles_with_letters_unless_told() {
        assert_eq!(by(&["keet", "p.csv"]), answer::AnswerBy::Cloze);
        assert_eq!(by(&["keet", "--twins", "t.toml"]), answer::AnswerBy::Letter);
        assert_eq!(by(&["keet", "--sets", "dir"]), answer::AnswerBy::Text);
        assert_eq!(by(&["keet", "--sets", "dir", "--answer", "letter"]), answer::AnswerBy::Letter);
        assert_eq!(by(&["keet", "p.csv", "--answer", "likelihood"]), answer::AnswerBy::Likelihood);
        assert_eq!(by(&["keet", "p.csv", "--answer", "cloze"]), answer::AnswerBy::Cloze);
    }
}
