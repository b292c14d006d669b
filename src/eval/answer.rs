//! The local model answers the questions of an [`EvalSet`]: one constrained answer per question,
//! format and rotation of the options (a letter, or the option's text: [`AnswerBy`]), at about the
//! cost of the prompt alone.
//!
//! Cost: the prompt is the system prompt, then the context, then the question, then its options,
//! so every question about one context shares the longest possible prefix. Questions are asked
//! grouped by context, then by format (so the explained format, which extends the context format's
//! text, starts from its KV state), then in the order of their text (so a question asked under
//! several seeds, and questions that differ only in the kernel they name, follow each other), then
//! by rotation (the rotations of one question share everything up to the options), and the engine
//! reuses the KV state of the longest prefix it already holds: each context is prefilled at most
//! once per format and each question or rotation runs only the tokens that differ from the prompt
//! before (the fast engine reuses any prefix; candle's reuse points fall on whole chunks). A
//! letter is the highest-logit of `A`-`D` at the assistant's first token ([`Engine::choose`]),
//! which is greedy decoding under a grammar that admits exactly one letter; an option's text is
//! greedy decoding under a grammar that admits exactly the four options ([`Engine::choose_text`]),
//! which runs a decode step only where options left still share their first tokens. In the cloze
//! form the question is asked without its options and each option's text is scored as the reply:
//! a prompt asked again (its rotations, the same question under another seed, another format
//! with the same text) is not run again, and each of its options is scored once, whatever
//! question it is an option of ([`Scored`]).

use super::peers::Format;
use super::score::Answered;
use super::{questions, Condition, EvalError, EvalSet, Question, LETTERS};
use crate::llm::{ChatMessage, Engine, Timings};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// How the model gives its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AnswerBy {
    /// One letter, `A`-`D` (the multiple-choice format as asked of people).
    #[default]
    Letter,
    /// The chosen option's text, word for word, decoded greedily under a grammar that admits
    /// exactly the options (a small model's letter bias does not decide).
    Text,
    /// The option whose text is likeliest after the prompt (mean log-probability per token), as
    /// likelihood-scored multiple choice does; the prompt asks for the text.
    Likelihood,
    /// The question without its options, and the option whose text is likeliest as the reply
    /// (mean log-probability per token): the cloze formulation that OLMES (Gu et al., 2024) and
    /// lm-eval-harness use for models too small to answer lettered multiple choice. The options
    /// are never shown, so their order cannot sway the answer: every rotation gets the same one.
    Cloze,
}

impl AnswerBy {
    /// The system prompt: what the model is and what it replies with.
    fn system_prompt(self) -> String {
        match self {
            AnswerBy::Letter => questions::system_prompt().to_string(),
            AnswerBy::Text | AnswerBy::Likelihood => questions::system_prompt_text_answers(),
            AnswerBy::Cloze => questions::system_prompt_cloze_answers(),
        }
    }
    /// The prompt's last line: what to answer with.
    fn instruction(self) -> &'static str {
        match self {
            AnswerBy::Letter => "Answer with the letter of the correct option.",
            AnswerBy::Text | AnswerBy::Likelihood => "Answer with the text of the correct option, word for word, without its letter.",
            AnswerBy::Cloze => "Answer in a few words.",
        }
    }
}

/// Room left in the model's window for the question, its options and the chat template.
const RESERVE_TOKENS: usize = 768;

/// What answering one format cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FormatCost {
    pub format: String,
    /// Distinct contexts (each prefilled once when the prefix is reused).
    pub contexts: usize,
    pub questions: usize,
    /// Prompt tokens over all questions.
    pub prompt_tokens: usize,
    /// Of those, tokens whose KV state was reused from the previous question.
    pub reused_tokens: usize,
    /// Tokens run (prompt tokens not reused), per rotation of the options (rotation 0 first): what
    /// the rotations after the first cost.
    pub run_tokens_by_rotation: Vec<usize>,
    /// Seconds spent running the prompts.
    pub prefill_s: f64,
    /// Decode steps run to write answers given as text (where the options left shared their
    /// first tokens), and their seconds; 0 for letters.
    pub decode_steps: usize,
    pub decode_s: f64,
}

/// One prompt to run: a question in a format.
pub struct Job {
    pub format: Format,
    /// Index into [`EvalSet::questions`].
    pub question: usize,
    /// Which rotation of the options ([`Question::options_in`]).
    pub rotation: usize,
    pub messages: [ChatMessage; 2],
    /// Prompt tokens, and those expected to be reused from the job before.
    pub tokens: usize,
    pub expected_reuse: usize,
    /// Option tokens this job runs to score its options (the cloze form: those of options not
    /// yet scored after this prompt; each option's last token is scored, not run).
    pub option_tokens: usize,
}

/// Every prompt of a run in the order it runs, with the token counts that predict its cost.
pub struct Plan {
    pub jobs: Vec<Job>,
    pub formats: Vec<Format>,
    /// Rotations of the options each question is asked in (1 or [`super::ROTATIONS`]).
    pub rotations: usize,
    pub answer_by: AnswerBy,
    /// Contexts cut to fit the model's window (per format and context).
    pub truncated: usize,
}

impl Plan {
    pub fn prompt_tokens(&self) -> usize {
        self.jobs.iter().map(|j| j.tokens).sum()
    }
    /// Tokens the model must run (the prompt tokens not reused).
    pub fn tokens_to_run(&self) -> usize {
        self.jobs.iter().map(|j| j.tokens - j.expected_reuse).sum()
    }
    /// Option tokens the model must run to score the options (the cloze form).
    pub fn option_tokens_to_run(&self) -> usize {
        self.jobs.iter().map(|j| j.option_tokens).sum()
    }
    /// Tokens the model must run, per rotation (rotation 0 first).
    pub fn tokens_to_run_by_rotation(&self) -> Vec<usize> {
        let mut v = vec![0; self.rotations];
        for j in &self.jobs {
            v[j.rotation] += j.tokens - j.expected_reuse;
        }
        v
    }
}

/// Orders the prompts (context, then format in the order given, then question text and seed, then
/// rotation) and counts their tokens with the model's tokenizer. A context's formats follow each
/// other because some extend others: the explained format is the context format with the model's
/// explanations added at the end, so its first question continues from the context format's KV
/// state. `rotations`: 1 (the options as drawn) or [`super::ROTATIONS`] (circular evaluation).
pub fn plan(set: &EvalSet, engine: &Engine, conditions: &[Condition], rotations: usize, by: AnswerBy) -> Result<Plan, EvalError> {
    let formats: Vec<Format> = conditions.iter().map(|c| Format::Keet(*c)).collect();
    plan_formats(set, engine, &formats, rotations, by)
}

/// The text question `i` is asked with in `format`: keet's context of its kernel, or the peer's.
fn context_text<'s>(set: &'s EvalSet, format: &Format, i: usize) -> &'s str {
    match format {
        Format::Keet(c) => set.contexts[set.questions[i].context].get(*c),
        Format::Peer(p, _) => &set.peers[*p].by_question[i],
    }
}

/// [`plan`] for keet's formats and peers' ([`super::peers`]), in the order given.
pub fn plan_formats(set: &EvalSet, engine: &Engine, formats: &[Format], rotations: usize, by: AnswerBy) -> Result<Plan, EvalError> {
    let rotations = rotations.clamp(1, super::ROTATIONS);
    let window = engine.info.context_length.saturating_sub(RESERVE_TOKENS).max(256);
    let count = |s: &str| engine.tokenizer().encode(s).map(|v| v.len()).unwrap_or(usize::MAX);
    let mut order: Vec<usize> = (0..set.questions.len()).collect();
    order.sort_by(|&a, &b| {
        let (qa, qb) = (&set.questions[a], &set.questions[b]);
        (qa.context, &qa.question, qa.seed, a).cmp(&(qb.context, &qb.question, qb.seed, b))
    });
    let granularity = engine.reuse_granularity();
    let mut jobs = Vec::with_capacity(order.len() * formats.len());
    let mut truncated = 0;
    let mut previous: Vec<u32> = Vec::new();
    // the cloze form: the options already scored after each prompt (as `run` keeps them)
    let mut scored: HashMap<[String; 2], HashSet<&str>> = HashMap::new();
    for about_one_context in order.chunk_by(|&a, &b| set.questions[a].context == set.questions[b].context) {
        for format in formats {
            // (the text as given, fitted to the window): fitted once per distinct text
            let mut fitted: Option<(&str, String)> = None;
            for (&i, rotation) in about_one_context.iter().flat_map(|i| (0..rotations).map(move |r| (i, r))) {
                let q = &set.questions[i];
                let given = context_text(set, format, i);
                if fitted.as_ref().is_none_or(|(raw, _)| *raw != given) {
                    let (text, cut) = fit_lines(given, window, &count);
                    truncated += usize::from(cut && rotation == 0);
                    fitted = Some((given, text));
                }
                let ctx = fitted.as_ref().map(|f| f.1.as_str()).unwrap_or_default();
                let messages = [ChatMessage::system(by.system_prompt()), ChatMessage::user(prompt(ctx, q, rotation, by))];
                let ids = engine.prompt_tokens(&messages)?;
                let tokens = ids.len();
                let mut option_tokens = 0;
                if by == AnswerBy::Cloze {
                    let known = scored.entry(prompt_key(&messages)).or_default();
                    let new: Vec<&str> = q.options_in(0).into_iter().filter(|o| known.insert(o)).collect();
                    if new.is_empty() {
                        // every option already scored after this very prompt: nothing runs
                        let format = format.clone();
                        jobs.push(Job { format, question: i, rotation, messages, tokens, expected_reuse: tokens, option_tokens });
                        continue;
                    }
                    option_tokens = new.iter().map(|o| count(o).saturating_sub(1)).sum();
                }
                let common = previous.iter().zip(&ids).take_while(|(a, b)| a == b).count();
                let expected_reuse = common.min(tokens.saturating_sub(1)) / granularity * granularity;
                jobs.push(Job { format: format.clone(), question: i, rotation, messages, tokens, expected_reuse, option_tokens });
                previous = ids;
            }
        }
    }
    Ok(Plan { jobs, formats: formats.to_vec(), rotations, answer_by: by, truncated })
}

/// Measures the model's prompt speed on a warm-up prompt (about `tokens` long), in tokens per
/// second, and forgets it.
pub fn prompt_rate(engine: &mut Engine, tokens: usize) -> Result<f64, EvalError> {
    let filler = "| sm__throughput.avg.pct_of_peak_sustained_elapsed | 42.5 |\n".repeat(tokens / 20 + 1);
    let messages = [ChatMessage::system(questions::system_prompt()), ChatMessage::user(filler)];
    engine.reset();
    let (_, _, t) = engine.choose(&messages, &LETTERS)?;
    engine.reset();
    Ok(if t.prompt_s > 0.0 { t.prompt_tokens as f64 / t.prompt_s } else { 0.0 })
}

/// The model's answers and what they cost.
pub struct AnswerRun {
    pub answers: Vec<Answered>,
    pub costs: Vec<FormatCost>,
    pub truncated: usize,
}

/// Runs `plan`: every question in every format and rotation, one letter each. With `fresh`, the KV cache is
/// dropped before each question (a full prefill every time: the reference the reuse must match).
/// `progress(tokens run so far)` after each question (prompt tokens, and in the cloze form option
/// tokens: [`Plan::tokens_to_run`] plus [`Plan::option_tokens_to_run`] in all).
pub fn run(set: &EvalSet, engine: &mut Engine, plan: &Plan, fresh: bool, progress: &mut dyn FnMut(usize)) -> Result<AnswerRun, EvalError> {
    let mut given: Vec<BTreeMap<String, Vec<String>>> = vec![BTreeMap::new(); set.questions.len()];
    let mut costs: BTreeMap<&str, FormatCost> = BTreeMap::new();
    let mut contexts: BTreeMap<&str, std::collections::BTreeSet<usize>> = BTreeMap::new();
    let mut run_tokens = 0usize;
    let mut scored = Scored::default();
    engine.reset();
    for job in &plan.jobs {
        if fresh {
            engine.reset();
        }
        let (at, t) = match plan.answer_by {
            AnswerBy::Letter => engine.choose(&job.messages, &LETTERS).map(|(at, _, t)| (at, t))?,
            AnswerBy::Text => engine.choose_text(&job.messages, &set.questions[job.question].options_in(job.rotation))?,
            AnswerBy::Likelihood => {
                engine.choose_likeliest(&job.messages, &set.questions[job.question].options_in(job.rotation)).map(|(at, _, t)| (at, t))?
            }
            AnswerBy::Cloze => {
                let q = &set.questions[job.question];
                let (option, t) = scored.choose(engine, job, &q.options_in(0))?;
                (q.position_in(option, job.rotation), t)
            }
        };
        let name = job.format.name();
        let letters = given[job.question].entry(name.to_string()).or_insert_with(|| vec![String::new(); plan.rotations]);
        letters[job.rotation] = LETTERS[at].to_string();
        let cost = costs.entry(name).or_insert_with(|| FormatCost {
            format: name.into(),
            run_tokens_by_rotation: vec![0; plan.rotations],
            ..Default::default()
        });
        cost.questions += usize::from(job.rotation == 0);
        cost.prompt_tokens += t.prompt_tokens;
        cost.reused_tokens += t.reused_tokens;
        cost.run_tokens_by_rotation[job.rotation] += t.prompt_tokens - t.reused_tokens;
        cost.prefill_s += t.prompt_s;
        cost.decode_steps += t.generated_tokens;
        cost.decode_s += t.decode_s;
        contexts.entry(name).or_default().insert(set.questions[job.question].context);
        run_tokens += t.prompt_tokens - t.reused_tokens;
        if plan.answer_by == AnswerBy::Cloze {
            run_tokens += t.generated_tokens; // the options' tokens, which the plan counts too
        }
        progress(run_tokens);
    }
    let answers = set
        .questions
        .iter()
        .zip(given)
        .map(|(q, given)| Answered { id: q.id.clone(), kind: q.kind, answer: q.answer.clone(), given })
        .collect();
    let costs = plan
        .formats
        .iter()
        .filter_map(|f| {
            let mut cost = costs.remove(f.name())?;
            cost.contexts = contexts.get(f.name()).map(|s| s.len()).unwrap_or(0);
            Some(cost)
        })
        .collect();
    Ok(AnswerRun { answers, costs, truncated: plan.truncated })
}

/// A prompt as the cloze form's scores are keyed: its system and user text.
fn prompt_key(messages: &[ChatMessage; 2]) -> [String; 2] {
    [messages[0].content.clone(), messages[1].content.clone()]
}

/// The cloze form's option scores (mean log-probability per token, as
/// [`Engine::choose_likeliest`] ranks them) by prompt and option text: the same prompt gives the
/// same scores, so a prompt asked again (a rotation, the same question under another seed) runs
/// only the options not yet scored after it, and nothing when it has them all.
#[derive(Default)]
struct Scored(HashMap<[String; 2], HashMap<String, f32>>);

impl Scored {
    /// The likeliest of `options` as the reply to `job`'s prompt (its index; the first of equal
    /// scores, as [`Engine::choose_likeliest`]) and what scoring it cost.
    fn choose(&mut self, engine: &mut Engine, job: &Job, options: &[&str]) -> Result<(usize, Timings), EvalError> {
        let known = self.0.entry(prompt_key(&job.messages)).or_default();
        let mut missing: Vec<&str> = Vec::new();
        for option in options {
            if !known.contains_key(*option) && !missing.contains(option) {
                missing.push(option);
            }
        }
        let timings = if missing.is_empty() {
            Timings { prompt_tokens: job.tokens, reused_tokens: job.tokens, ..Default::default() }
        } else {
            let (log_probs, timings) = engine.option_log_probs(&job.messages, &missing)?;
            for (option, lp) in missing.iter().zip(log_probs) {
                known.insert(option.to_string(), lp.mean() as f32);
            }
            timings
        };
        let means: Vec<f32> = options.iter().map(|o| known[*o]).collect();
        let best = (0..means.len()).fold(0, |best, i| if means[i] > means[best] { i } else { best });
        Ok((best, timings))
    }
}

/// Plans and runs every question in every format and rotation with prefix reuse (no progress shown).
pub fn answer(
    set: &EvalSet,
    engine: &mut Engine,
    conditions: &[Condition],
    rotations: usize,
    by: AnswerBy,
) -> Result<AnswerRun, EvalError> {
    let plan = plan(set, engine, conditions, rotations, by)?;
    run(set, engine, &plan, false, &mut |_| {})
}

/// The user message: the context, then the question and its lettered options in rotation
/// `rotation`. The context comes first so that the questions about it share it as a prefix, and the
/// options last so that the rotations of one question share all but them.
/// With [`AnswerBy::Cloze`] the options are left out (the same prompt in every rotation).
pub fn prompt(context: &str, q: &Question, rotation: usize, by: AnswerBy) -> String {
    let mut s = format!("{}\n\n---\nQuestion: {}\n", context.trim_end(), q.question);
    if by == AnswerBy::Cloze {
        s.push_str(by.instruction());
        return s;
    }
    for (l, o) in LETTERS.iter().zip(q.options_in(rotation)) {
        s.push_str(&format!("{l}. {o}\n"));
    }
    s.push_str(by.instruction());
    s
}

/// The first lines of `text` that fit in `max_tokens`; true when lines were cut.
fn fit_lines(text: &str, max_tokens: usize, count: &dyn Fn(&str) -> usize) -> (String, bool) {
    if count(text) <= max_tokens {
        return (text.to_string(), false);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (mut lo, mut hi) = (0usize, lines.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if count(&lines[..mid].concat()) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut s = lines[..lo].concat();
    s.push_str("\n(cut to fit the model's context window)\n");
    (s, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitting_keeps_whole_first_lines() {
        let words = |s: &str| s.split_whitespace().count();
        let text = "a b\nc d\ne f\n";
        assert_eq!(fit_lines(text, 10, &words), (text.to_string(), false));
        let (s, cut) = fit_lines(text, 4, &words);
        assert!(cut);
        assert!(s.starts_with("a b\nc d\n") && !s.contains("e f"), "{s}");
    }

    #[test]
    fn the_cloze_prompt_asks_without_options_and_is_the_same_in_every_rotation() {
        let q = Question {
            id: "q".into(),
            seed: 0,
            kind: questions::QuestionKind::BoundUnit,
            file: Default::default(),
            kernel: "k".into(),
            question: "Which unit bounds k?".into(),
            options: ["DRAM", "the L2 cache", "the SM", "none"].map(String::from).to_vec(),
            answer: "A".into(),
            answer_key: "dram".into(),
            basis: vec![],
            context: 0,
        };
        let cloze: Vec<String> = (0..4).map(|r| prompt("busiest DRAM at 85% of peak", &q, r, AnswerBy::Cloze)).collect();
        assert!(cloze.iter().all(|p| *p == cloze[0]));
        assert!(cloze[0].ends_with("Which unit bounds k?\nAnswer in a few words."), "{}", cloze[0]);
        let letters = prompt("busiest DRAM at 85% of peak", &q, 1, AnswerBy::Letter);
        assert!(letters.contains("A. the L2 cache\n") && letters.ends_with("letter of the correct option."), "{letters}");
    }
}
