//! `keet eval`'s cost model on the small model (SmolLM2): the questions about one context, and the
//! rotations of each question's options, continue from its KV state; the tokens run are those the
//! plan predicts, and they give the same letters (and the same logits) as a full prefill of every
//! prompt.

use crate::llm_support;

use keet::eval::{self, answer, Condition, EvalOptions};
use keet::llm::{ChatMessage, Engine, EngineOptions};
use std::path::Path;

fn small_model() -> Engine {
    // SmolLM2 by its manifest name, whatever the default model is: the mechanics, not the answers.
    let opts = EngineOptions { model: Some("smollm2-135m-instruct".into()), device: Some("cpu".into()), threads: Some(1) };
    Engine::load(&opts)
        .unwrap_or_else(|e| panic!("this test needs SmolLM2 (scripts/install-model.sh): {e}\n(set KEET_SKIP_MODEL_TESTS=1 to skip it)"))
}

#[test]
fn prefix_reuse_answers_as_a_full_prefill_does() {
    if llm_support::skip() {
        return;
    }
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/rtxa2000-sample/addConstDouble.ncu-rep");
    let set = eval::build(&[profile], &EvalOptions { top: 1, seeds: vec![0, 1], jobs: 1, concurrency: 1 }).unwrap();
    assert!(set.questions.len() >= 4, "{} questions", set.questions.len());
    let mut engine = small_model();
    // The context format: a few hundred tokens (the raw table is the same mechanics at 3x the cost).
    let formats = [Condition::Context];
    let plan = answer::plan(&set, &engine, &formats, 1, answer::AnswerBy::Letter).unwrap();
    assert!(
        plan.tokens_to_run() < plan.prompt_tokens() / 2,
        "the plan reuses the shared contexts: {} of {} to run",
        plan.tokens_to_run(),
        plan.prompt_tokens()
    );

    let reused = answer::run(&set, &mut engine, &plan, false, &mut |_| {}).unwrap();
    let fresh = answer::run(&set, &mut engine, &plan, true, &mut |_| {}).unwrap();
    for (r, f) in reused.answers.iter().zip(&fresh.answers) {
        assert_eq!(r.given, f.given, "{}: prefix reuse changed the answer", r.id);
    }
    let tokens = |run: &answer::AnswerRun| run.costs.iter().map(|c| c.reused_tokens).sum::<usize>();
    assert_eq!(tokens(&fresh), 0, "a full prefill reuses nothing");
    // Each context is prefilled once per format: everything after the first question of a context
    // reuses at least the context (to the engine's chunk boundary).
    let expected: usize = plan.jobs.iter().map(|j| j.expected_reuse).sum();
    assert_eq!(tokens(&reused), expected, "the engine reused what the plan predicted");
    for c in &reused.costs {
        assert_eq!(c.questions, set.questions.len());
        assert!(c.reused_tokens * 2 > c.prompt_tokens, "{}: {} of {} prompt tokens reused", c.format, c.reused_tokens, c.prompt_tokens);
    }

    // The logits themselves: a question asked after another about the same context equals the same
    // question asked cold, bit for bit.
    let (first, second) = (&plan.jobs[0], &plan.jobs[1]);
    assert_eq!(set.questions[first.question].context, set.questions[second.question].context);
    engine.reset();
    let (_, cold, t_cold) = engine.choose(&second.messages, &eval::LETTERS).unwrap();
    engine.reset();
    engine.choose(&first.messages, &eval::LETTERS).unwrap();
    let (_, warm, t_warm) = engine.choose(&second.messages, &eval::LETTERS).unwrap();
    assert_eq!(t_cold.reused_tokens, 0);
    assert!(t_warm.reused_tokens > 0);
    assert_eq!(cold, warm, "the letters' logits differ after prefix reuse");
}

/// Circular evaluation: each question in its four rotations. The context is prefilled once; each
/// rotation after the first runs only its options and the prompt's tail; the engine runs exactly the
/// tokens the plan predicts, per rotation, and answers as a full prefill of each prompt does.
#[test]
fn rotations_reuse_the_contexts_kv_state() {
    if llm_support::skip() {
        return;
    }
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/rtxa2000-sample/addConstDouble.ncu-rep");
    let set = eval::build(&[profile], &EvalOptions { top: 1, seeds: vec![0], jobs: 1, concurrency: 1 }).unwrap();
    let n = set.questions.len();
    assert!(n >= 2, "{n} questions");
    let mut engine = small_model();
    let plan = answer::plan(&set, &engine, &[Condition::Context], eval::ROTATIONS, answer::AnswerBy::Letter).unwrap();
    assert_eq!(plan.jobs.len(), n * eval::ROTATIONS);
    let contexts: std::collections::BTreeSet<usize> = set.questions.iter().map(|q| q.context).collect();
    assert_eq!(contexts.len(), 1, "one kernel: one context");
    let context_tokens = engine.tokenizer().encode(&set.contexts[0].context).unwrap().len();
    for (i, job) in plan.jobs.iter().enumerate() {
        let run = job.tokens - job.expected_reuse;
        if i > 0 {
            assert!(run < context_tokens / 2, "job {i} (rotation {}): {run} tokens to run, the context is {context_tokens}", job.rotation);
        }
        if job.rotation > 0 {
            // Same question, same context: only the options onwards differ from the rotation before.
            let before = &plan.jobs[i - 1];
            assert_eq!((before.question, before.rotation + 1), (job.question, job.rotation));
            assert!(run < 120, "rotation {}: {run} of {} tokens to run", job.rotation, job.tokens);
        }
    }
    let by_rotation = plan.tokens_to_run_by_rotation();
    assert!(by_rotation[1..].iter().all(|&r| r < by_rotation[0]), "{by_rotation:?}");

    let reused = answer::run(&set, &mut engine, &plan, false, &mut |_| {}).unwrap();
    let cost = &reused.costs[0];
    assert_eq!(cost.questions, n);
    assert_eq!(cost.prompt_tokens - cost.reused_tokens, plan.tokens_to_run(), "the tokens run equal the plan");
    assert_eq!(cost.run_tokens_by_rotation, by_rotation, "per rotation too");
    let fresh = answer::run(&set, &mut engine, &plan, true, &mut |_| {}).unwrap();
    for (r, f) in reused.answers.iter().zip(&fresh.answers) {
        assert_eq!(r.given["context"].len(), eval::ROTATIONS);
        assert_eq!(r.given, f.given, "{}: prefix reuse changed an answer", r.id);
    }
}

#[test]
fn a_choice_must_be_one_token() {
    if llm_support::skip() {
        return;
    }
    let mut engine = small_model();
    let m = [ChatMessage::user("Pick one.".to_string())];
    let e = engine.choose(&m, &["A", "a long answer"]).unwrap_err().to_string();
    assert!(e.contains("one token"), "{e}");
}

/// A peer's contexts (`--context NAME=FILE.jsonl`) are asked exactly as keet's are: a peer whose
/// context is keet's own text gets the same prompts, and so the same letters, as the context format.
#[test]
fn a_peer_format_is_asked_as_keets_formats_are() {
    if llm_support::skip() {
        return;
    }
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/rtxa2000-sample/addConstDouble.ncu-rep");
    let mut set = eval::build(&[profile], &EvalOptions { top: 1, seeds: vec![0], jobs: 1, concurrency: 1 }).unwrap();
    let by_question: Vec<String> = set.questions.iter().map(|q| set.contexts[q.context].context.clone()).collect();
    set.peers.push(eval::peers::PeerContexts { name: "copy".into(), file: "copy.jsonl".into(), by_question });
    let mut engine = small_model();
    let formats = [eval::peers::Format::Keet(Condition::Context), eval::peers::Format::Peer(0, "copy".into())];
    let plan = answer::plan_formats(&set, &engine, &formats, 1, answer::AnswerBy::Letter).unwrap();
    let prompts =
        |name: &str| plan.jobs.iter().filter(|j| j.format.name() == name).map(|j| j.messages[1].content.clone()).collect::<Vec<_>>();
    assert_eq!(prompts("copy"), prompts("context"));
    let run = answer::run(&set, &mut engine, &plan, false, &mut |_| {}).unwrap();
    for a in &run.answers {
        assert_eq!(a.given.get("copy"), a.given.get("context"), "{}", a.id);
    }
    assert_eq!(run.costs.iter().map(|c| c.format.as_str()).collect::<Vec<_>>(), ["context", "copy"]);
}

/// Answers given as the option's text: one-token options are the letters' choice exactly; options
/// that share their first tokens cost decode steps, counted; the same option is given twice is an
/// error; and a run with prefix reuse gives the answers (and runs the prompt tokens) a full
/// prefill of every prompt does.
#[test]
fn answers_by_text_follow_the_options_tokens() {
    if llm_support::skip() {
        return;
    }
    let mut engine = small_model();
    let m = [ChatMessage::user("Which letter comes after A? Options: A, B, C, D.".to_string())];
    let (letter, _, _) = engine.choose(&m, &eval::LETTERS).unwrap();
    engine.reset();
    let (text, t) = engine.choose_text(&m, &eval::LETTERS).unwrap();
    assert_eq!(letter, text, "one-token options: the letter's choice");
    assert_eq!(t.generated_tokens, 0, "options that differ at once cost the prompt alone");
    let shared = ["the L2 cache", "the L1/TEX cache and shared memory"];
    let (_, t) = engine.choose_text(&m, &shared).unwrap();
    assert!(t.generated_tokens >= 1, "options sharing `the` need a decode step: {t:?}");
    let e = engine.choose_text(&m, &["DRAM", "DRAM"]).unwrap_err().to_string();
    assert!(e.contains("twice"), "{e}");

    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/rtxa2000-sample/addConstDouble.ncu-rep");
    let set = eval::build(&[profile], &EvalOptions { top: 1, seeds: vec![0], jobs: 1, concurrency: 1 }).unwrap();
    let plan = answer::plan(&set, &engine, &[Condition::Context], eval::ROTATIONS, answer::AnswerBy::Text).unwrap();
    assert!(plan.jobs[0].messages[1].content.ends_with("word for word, without its letter."));
    let reused = answer::run(&set, &mut engine, &plan, false, &mut |_| {}).unwrap();
    let cost = &reused.costs[0];
    assert_eq!(cost.prompt_tokens - cost.reused_tokens, plan.tokens_to_run(), "the prompt tokens run equal the plan");
    let fresh = answer::run(&set, &mut engine, &plan, true, &mut |_| {}).unwrap();
    assert_eq!(fresh.costs[0].decode_steps, cost.decode_steps);
    for (r, f) in reused.answers.iter().zip(&fresh.answers) {
        assert_eq!(r.given, f.given, "{}: prefix reuse changed an answer", r.id);
    }
}

/// The cloze form (`--answer cloze`): the question is asked without its options, so every rotation
/// is the same prompt, scored once (the rotations after the first run nothing, as the plan says),
/// and the letter given in each rotation is the one the same option stands under there. A question
/// asked again under another seed scores only the options it has not had: the option tokens run
/// are the plan's, fewer than scoring every question's options, and every answer is the one a cold
/// engine gives the question alone.
#[test]
fn cloze_answers_one_option_in_every_rotation() {
    if llm_support::skip() {
        return;
    }
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/rtxa2000-sample/addConstDouble.ncu-rep");
    let set = eval::build(&[profile], &EvalOptions { top: 1, seeds: vec![0, 1], jobs: 1, concurrency: 1 }).unwrap();
    let mut engine = small_model();
    let plan = answer::plan(&set, &engine, &[Condition::Context], eval::ROTATIONS, answer::AnswerBy::Cloze).unwrap();
    for job in &plan.jobs {
        let asked = &job.messages[1].content;
        assert!(asked.ends_with("Answer in a few words."), "{asked}");
        for option in &set.questions[job.question].options {
            assert!(!asked.contains(option.as_str()), "the cloze prompt shows option {option:?}");
        }
        if job.rotation > 0 {
            assert_eq!(job.tokens, job.expected_reuse, "rotation {} runs nothing", job.rotation);
        }
    }
    let reused = answer::run(&set, &mut engine, &plan, false, &mut |_| {}).unwrap();
    let cost = &reused.costs[0];
    assert_eq!(cost.prompt_tokens - cost.reused_tokens, plan.tokens_to_run(), "the tokens run equal the plan");
    assert!(cost.run_tokens_by_rotation[1..].iter().all(|&r| r == 0), "{:?}", cost.run_tokens_by_rotation);
    assert_eq!(cost.decode_steps, plan.option_tokens_to_run(), "the option tokens run equal the plan");
    let every_option: usize =
        set.questions.iter().flat_map(|q| q.options.iter()).map(|o| engine.tokenizer().encode(o).unwrap().len() - 1).sum();
    assert!(
        cost.decode_steps < every_option,
        "the second seed's questions reuse the first's scores: {} option tokens run, {every_option} without",
        cost.decode_steps
    );
    for job in plan.jobs.iter().filter(|j| j.rotation == 0) {
        let q = &set.questions[job.question];
        engine.reset();
        let (alone, _, _) = engine.choose_likeliest(&job.messages, &q.options_in(0)).unwrap();
        let given = &reused.answers[job.question].given["context"][0];
        assert_eq!(given, eval::LETTERS[alone], "{}: the answer differs from the question's alone", q.id);
    }
    for (q, a) in set.questions.iter().zip(&reused.answers) {
        let chosen: Vec<&str> = a.given["context"]
            .iter()
            .enumerate()
            .map(|(r, letter)| q.options_in(r)[eval::LETTERS.iter().position(|l| l == letter).unwrap()])
            .collect();
        assert!(chosen.iter().all(|o| *o == chosen[0]), "{}: {chosen:?}", q.id);
    }
    let fresh = answer::run(&set, &mut engine, &plan, true, &mut |_| {}).unwrap();
    for (r, f) in reused.answers.iter().zip(&fresh.answers) {
        assert_eq!(r.given, f.given, "{}: prefix reuse changed an answer", r.id);
    }
}
