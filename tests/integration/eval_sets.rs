//! `keet eval --sets` on the real sets of `../shared/corpus-sets`: keyed answers computed from the
//! members' raw metrics (the GEMM series' fastest member and best step against
//! `gpu__time_duration.sum` read here), questions that do not move when keet's analysis of the
//! members is scrambled, options distinct with the key once, keet's set context holding no number
//! the members' facts do not give, the CLI's formats, and (with the model) the JSON schema.

use crate::llm_support;
use keet::eval::questions::QuestionKind;
use keet::eval::sets as eval_sets;
use keet::eval::{EvalOptions, EvalSet, LETTERS};
use keet::sets::{self, KernelSet, Member, SetOptions};
use rand::SeedableRng;
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared").join(rel)
}

/// The folder, or `None` (and a note) when the shared corpus is absent.
fn corpus(rel: &str) -> Option<PathBuf> {
    let p = shared(rel);
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: {} is absent (the shared corpus is not checked out)", p.display());
        None
    }
}

fn keet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).env("KEET_MODEL", llm_support::TEST_MODEL).output().expect("run keet")
}

fn build(dir: &Path, seeds: &[u64]) -> EvalSet {
    eval_sets::build(&[dir.to_path_buf()], &EvalOptions { top: 5, seeds: seeds.to_vec(), jobs: 1, concurrency: 1 })
        .expect("builds the set questions")
}

fn raw_ns(launch: &keet::profile::Launch) -> f64 {
    launch.metrics.get("gpu__time_duration.sum").and_then(|m| m.as_f64()).expect("gpu__time_duration.sum")
}

/// The GEMM series' own kernel (`void gemm<...>`, launch 0) in each file, in the manifest's order,
/// with its raw time.
fn gemm_times(dir: &Path) -> Vec<(String, f64)> {
    ["gemm_v1_alter", "gemm_v1_alter_1", "gemm_v7_alter", "gemm_v8_alter", "gemm_v9_alter"]
        .iter()
        .map(|stem| {
            let p = keet::profile::read_path(&dir.join(format!("{stem}.ncu-rep"))).expect("reads the profile");
            let launch = p.launches.iter().find(|l| l.name.starts_with("void gemm<")).expect("the gemm launch");
            (stem.trim_start_matches("gemm_").to_string(), raw_ns(launch))
        })
        .collect()
}

#[test]
fn the_gemm_series_keys_follow_the_raw_times() {
    let Some(dir) = corpus("corpus-sets/rtx3080-gemm-versions") else { return };
    let times = gemm_times(&dir);
    let fastest = times.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0.clone();
    let best_step = (1..times.len()).max_by(|&a, &b| (times[a - 1].1 - times[a].1).total_cmp(&(times[b - 1].1 - times[b].1))).unwrap();
    let expected_step = format!("{} -> {}", times[best_step - 1].0, times[best_step].0);
    let set = build(&dir, &[0, 1]);
    for seed in [0, 1] {
        let about_gemm = |kind: QuestionKind| {
            set.questions
                .iter()
                .find(|q| q.seed == seed && q.kind == kind && q.kernel == "gemm")
                .unwrap_or_else(|| panic!("a {kind:?} question"))
        };
        let q = about_gemm(QuestionKind::SetFastest);
        assert_eq!(q.answer_key, fastest, "the fastest member is the one with the least gpu__time_duration.sum: {times:?}");
        let at = LETTERS.iter().position(|l| *l == q.answer).unwrap();
        assert_eq!(q.options[at], format!("`{fastest}`"));
        assert!(q.basis.iter().any(|b| b.metric == "gpu__time_duration.sum" && b.kernel == fastest));
        assert_eq!(about_gemm(QuestionKind::SetBestStep).answer_key, expected_step, "{times:?}");
    }
}

/// The launches of a set's members, read from their files.
fn launches_of(set: &KernelSet) -> Vec<keet::profile::Launch> {
    set.members.iter().map(|m| keet::profile::read_path(&m.file).expect("reads the member").launches[m.launch as usize].clone()).collect()
}

/// keet's analysis of the members turned upside down: times reversed, every regime, unit,
/// problem and fact changed, the findings and the fastest member rewritten.
fn scrambled(set: &KernelSet) -> KernelSet {
    let mut s = set.clone();
    let times: Vec<Option<f64>> = s.members.iter().rev().map(|m| m.duration_ns).collect();
    for (m, t) in s.members.iter_mut().zip(times) {
        m.duration_ns = t;
        m.regime = "compute-bound";
        m.bound_unit = Some("DRAM");
        m.bound_pct = Some(99.0);
        m.busiest_unit = Some("DRAM");
        m.busiest_pct = Some(99.0);
        m.primary = Some("bank-conflicts");
        for f in m.facts.iter_mut() {
            f.value = 1.0 + f.value * 3.0;
        }
    }
    s.findings.clear();
    s.changes.clear();
    s.summary = "nothing".into();
    if let (Some(f), Some(last)) = (s.fastest.as_mut(), set.members.last()) {
        f.value = last.value.clone();
    }
    s
}

#[test]
fn set_questions_never_read_keets_analysis_of_the_members() {
    let Some(dir) = corpus("corpus-sets") else { return };
    let files = keet::profile::expand_inputs(&[dir]).unwrap();
    let (found, _) = sets::find(&files, &SetOptions::default());
    let mut compared = 0;
    for set in &found {
        let launches = launches_of(set);
        let refs: Vec<&keet::profile::Launch> = launches.iter().collect();
        let ask = |s: &KernelSet| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            eval_sets::set_questions(s, &refs, &mut HashSet::new(), &mut rng)
        };
        let (plain, upside_down) = (ask(set), ask(&scrambled(set)));
        assert_eq!(plain, upside_down, "set {}: the questions moved with keet's analysis", set.name);
        compared += plain.len();
    }
    assert!(compared >= 20, "only {compared} questions compared");
}

#[test]
fn options_are_four_distinct_with_the_key_once_and_seeded() {
    let Some(dir) = corpus("corpus-sets") else { return };
    let set = build(&dir, &[0, 1]);
    let kinds: BTreeSet<&str> = set.questions.iter().map(|q| q.kind.name()).collect();
    for kind in ["set-fastest", "set-bound", "set-change", "set-best-step", "set-step-change"] {
        assert!(kinds.contains(kind), "no {kind} question: {kinds:?}");
    }
    for q in &set.questions {
        assert_eq!(q.options.len(), 4, "{}", q.id);
        let distinct: HashSet<&String> = q.options.iter().collect();
        assert_eq!(distinct.len(), 4, "{}: {:?}", q.id, q.options);
        let at = LETTERS.iter().position(|l| *l == q.answer).unwrap();
        let key_text = match q.kind {
            QuestionKind::SetFastest => Some(format!("`{}`", q.answer_key)),
            QuestionKind::SetChange if q.answer_key != "no-change" => Some(format!("`{}`", q.answer_key)),
            QuestionKind::SetBestStep if q.answer_key != "no-saving" => {
                let (a, b) = q.answer_key.split_once(" -> ").unwrap();
                Some(format!("`{a}` -> `{b}`"))
            }
            _ => None,
        };
        if let Some(text) = key_text {
            assert_eq!(q.options.iter().filter(|o| **o == text).count(), 1, "{}: the key once", q.id);
            assert_eq!(q.options[at], text, "{}: the answer letter names the key", q.id);
        }
        assert!(!q.basis.is_empty(), "{}: an answer rests on raw metrics", q.id);
    }
    let again = build(&dir, &[0, 1]);
    let shown = |s: &EvalSet| s.questions.iter().map(|q| (q.id.clone(), q.options.clone(), q.answer.clone())).collect::<Vec<_>>();
    assert_eq!(shown(&set), shown(&again), "the same seeds draw the same options");
    let other = build(&dir, &[5, 6]);
    assert_ne!(
        shown(&set).into_iter().map(|x| x.1).collect::<Vec<_>>(),
        shown(&other).into_iter().map(|x| x.1).collect::<Vec<_>>(),
        "other seeds draw other orders"
    );
}

/// Every number a member gives: its time, busiest unit's %, threads, work and facts, and what two
/// members' numbers give together (time and work ratios, percent changes), as reports print them.
fn member_numbers(members: &[Member]) -> HashSet<String> {
    use keet::rules::fmt_num;
    let mut out: HashSet<String> = HashSet::new();
    let mut add = |x: f64| {
        out.insert(fmt_num(x.abs()));
        out.extend(keet::format::duration(x.abs()).split(' ').next().map(str::to_string));
    };
    for m in members {
        let work = [m.duration_ns, m.bound_pct, m.busiest_pct, m.threads(), m.work.dram_bytes, m.work.warp_instructions, m.work.flops];
        for x in work.into_iter().flatten().chain(m.facts.iter().map(|f| f.value)) {
            add(x);
        }
        if let (Some(d), Some(t)) = (m.duration_ns, m.threads()) {
            add(d / t);
        }
        for n in members {
            let pairs = [(m.duration_ns, n.duration_ns), (m.threads(), n.threads()), (m.work.dram_bytes, n.work.dram_bytes)];
            for (x, y) in pairs.into_iter().chain([(m.work.warp_instructions, n.work.warp_instructions)]) {
                if let (Some(x), Some(y)) = (x, y) {
                    if x > 0.0 {
                        add(y / x);
                        add(100.0 * (y - x) / x);
                    }
                }
            }
        }
    }
    out
}

/// The numbers in `text` that neither the members' numbers nor their names (values, files,
/// kernels, the order and what varies) nor the noise threshold give.
fn unexplained_numbers(text: &str, set: &KernelSet) -> Vec<String> {
    let number = regex::Regex::new(r"[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?").unwrap();
    let allowed = member_numbers(&set.members);
    let mut names = format!("{} {} {}", set.name, set.order, set.varies.join(" "));
    for m in &set.members {
        names += &format!(" {} {} {}", m.value, m.kernel, m.file.display());
    }
    let named: HashSet<&str> = number.find_iter(&names).map(|x| x.as_str()).collect();
    let small = |s: &str| s.parse::<usize>().is_ok_and(|n| n <= set.members.len());
    let noise = keet::rules::fmt_num(sets::thresholds().time_noise_pct);
    number
        .find_iter(text)
        .map(|x| x.as_str())
        .filter(|s| !allowed.contains(*s) && !named.contains(s) && !small(s) && *s != noise)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_set_context_holds_only_numbers_from_the_members() {
    let Some(dir) = corpus("corpus-sets") else { return };
    let files = keet::profile::expand_inputs(&[dir]).unwrap();
    let (found, _) = sets::find(&files, &SetOptions::default());
    assert!(found.len() >= 4);
    for set in &found {
        let text = keet::render::set_context::set_context(set);
        for m in &set.members {
            assert!(text.contains(&format!("| {} |", m.value)), "{}: member {} has its row", set.name, m.value);
        }
        let stray = unexplained_numbers(&text, set);
        assert!(stray.is_empty(), "set {}: numbers from nowhere {stray:?} in\n{text}", set.name);
        // The check can fail: a made-up time is caught.
        let tampered = format!("{text}- The fastest member runs in 123.457 us.\n");
        assert_eq!(unexplained_numbers(&tampered, set), vec!["123.457".to_string()]);
    }
}

#[test]
fn the_cli_writes_set_questions_and_refuses_single_profile_formats() {
    let Some(dir) = corpus("corpus-sets") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("q.jsonl");
    let o = keet(&["eval", "--sets", dir.to_str().unwrap(), "--no-llm", "--questions-out", out.to_str().unwrap(), "--seeds", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 20, "{} questions", lines.len());
    for q in &lines {
        let c = &q["contexts"];
        for f in ["raw", "profiles", "set"] {
            assert!(c[f].as_str().is_some_and(|s| !s.is_empty()), "{}: no {f} context", q["id"]);
        }
        assert!(c["set"].as_str().unwrap().starts_with("## Set `"), "{}", q["id"]);
        assert!(c["raw"].as_str().unwrap().contains("gpu__time_duration.sum"));
    }
    let o = keet(&["eval", "--sets", dir.to_str().unwrap(), "--no-llm", "--formats", "context"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--sets asks in"), "{}", String::from_utf8_lossy(&o.stderr));
    let single = shared("corpus/rtxa2000-sample/addConstDouble.ncu-rep");
    let o = keet(&["eval", single.to_str().unwrap(), "--no-llm", "--formats", "raw,set"]);
    assert_ne!(o.status.code(), Some(0), "set is a --sets format only");
}

#[test]
fn explain_context_ends_with_the_sets_found() {
    let Some(dir) = corpus("corpus-sets/rtx5060ti-transpose-versions") else { return };
    let o = keet(&["explain", dir.to_str().unwrap(), "--no-llm", "-f", "context"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let at = text.find("# Sets of profiles").unwrap_or_else(|| panic!("no sets section in\n{text}"));
    assert!(text[at..].contains("| transposeMatrixAdvanced |"), "{}", &text[at..]);
    let o = keet(&["explain", dir.to_str().unwrap(), "--no-llm", "-f", "context", "--no-sets"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("# Sets of profiles"));
}

#[test]
fn eval_sets_with_the_model_scores_set_against_profiles() {
    if llm_support::skip() {
        return;
    }
    let Some(dir) = corpus("corpus-sets/rtx5060ti-transpose-versions") else { return };
    let o = keet(&[
        "eval",
        "--sets",
        dir.to_str().unwrap(),
        "--model",
        llm_support::TEST_MODEL,
        "--threads",
        "1",
        "--seeds",
        "0",
        "--rotations",
        "1",
        "-f",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/eval-v3.schema.json")).unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(&r).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(r["formats"], serde_json::json!(["raw", "profiles", "set"]));
    let vs = &r["set_vs_profiles"];
    assert_eq!(vs["against"], "profiles");
    let n = r["questions"].as_u64().unwrap();
    assert_eq!(vs["overall"]["questions"].as_u64(), Some(n));
    let (wins, losses) = (vs["overall"]["paired"]["wins"].as_u64().unwrap(), vs["overall"]["paired"]["losses"].as_u64().unwrap());
    assert!(wins + losses <= n);
}

/// The unit a set-context row names in its busiest-unit cell, as the bound-unit key writes it
/// (`dram`, `l2`, `l1`, `sm`), with its % of peak.
fn row_unit(context: &str, number: usize) -> Option<(String, f64)> {
    let row = context.lines().find(|l| l.starts_with(&format!("| {number} | ")))?;
    let cell = row.split(" | ").nth(5)?;
    let (unit, pct) = cell.split_once(' ')?;
    let key = match unit {
        "DRAM" => "dram",
        "L2" => "l2",
        "L1/TEX" => "l1",
        "SM" => "sm",
        other => other,
    };
    Some((key.to_string(), pct.trim_end_matches('%').parse().ok()?))
}

#[test]
fn the_set_context_names_the_unit_the_set_bound_key_names() {
    let Some(dir) = corpus("corpus-sets") else { return };
    let files = keet::profile::expand_inputs(&[dir]).unwrap();
    let (found, _) = sets::find(&files, &SetOptions::default());
    let (mut named, mut idle) = (0, 0);
    for set in &found {
        let launches = launches_of(set);
        let refs: Vec<&keet::profile::Launch> = launches.iter().collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        let context = keet::render::set_context::set_context(set);
        for q in
            eval_sets::set_questions(set, &refs, &mut HashSet::new(), &mut rng).into_iter().filter(|q| q.kind == QuestionKind::SetBound)
        {
            let member = q.basis[0].kernel.clone();
            let number = set.members.iter().position(|m| m.value == member).expect("the member asked about") + 1;
            let (unit, pct) = row_unit(&context, number).unwrap_or_else(|| panic!("{}: no unit in row {number} of\n{context}", set.name));
            if q.answer_key == "none" {
                // No unit is busy: whatever the row names is idle too.
                assert!(pct < 30.0, "{} {member}: keyed none, the context says {unit} {pct}%", set.name);
                idle += 1;
            } else {
                // The GEMM members are keyed L1/TEX (82% of peak for v1_alter); ncu's combined
                // "memory" throughput names no unit and would not match.
                assert_eq!(unit, q.answer_key, "{} {member}: the context's busiest unit against the key\n{context}", set.name);
                named += 1;
            }
        }
    }
    assert!(named >= 5 && idle >= 1, "{named} keyed units and {idle} idle members checked");
}
