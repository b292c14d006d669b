//! `--format context` end to end: the compact report for an LLM's context window stays within its
//! `--max-tokens` budget (counted with the default model's tokenizer), cuts the least important
//! kernels first and says so; bad budgets are usage errors.

use crate::llm_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

fn keet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).output().expect("run keet")
}

fn stdout(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The `## K<rank>` headings, in order.
fn headings(s: &str) -> Vec<String> {
    s.lines().filter(|l| l.starts_with("## K")).map(|l| l.split_whitespace().nth(1).unwrap().to_string()).collect()
}

#[test]
fn explain_context_stays_within_its_budget_and_cuts_the_least_important_kernels() {
    if llm_support::skip() {
        return;
    }
    let (tok, _) = keet::llm::tokenizer::for_model(None).expect("the default model's tokenizer");
    let count = |s: &str| tok.encode(s).unwrap().len();
    let file = corpus("h200-moe/decode_c1.ncu-rep");
    let f = file.to_str().unwrap();
    let full = stdout(&keet(&["explain", "--no-llm", "--no-cache", "-f", "context", f]));
    let all = headings(&full);
    assert!(all.len() >= 5, "{full}");
    assert!(full.contains("- Regime: ") && full.contains("- Primary problem: ") && full.contains("- Try: "), "{full}");
    let full_tokens = count(&full);
    for budget in [120usize, 300, 700, 1500, full_tokens / 2, full_tokens + 10] {
        let out = stdout(&keet(&["explain", "--no-llm", "--no-cache", "-f", "context", "--max-tokens", &budget.to_string(), f]));
        let n = count(&out);
        assert!(n <= budget, "{n} tokens for a budget of {budget}:\n{out}");
        let shown = headings(&out);
        // From a few hundred tokens on, the first kernel's identity, regime and verdict fit.
        assert!(budget < 300 || !shown.is_empty(), "budget {budget}: no kernel left:\n{out}");
        assert_eq!(shown[..], all[..shown.len()], "budget {budget}: the most important kernels stay, in order");
        if shown.len() < all.len() {
            assert!(out.contains("left out to fit "), "budget {budget}: the cut is not said:\n{out}");
        } else {
            assert_eq!(out, full, "a budget above the whole report changes nothing");
        }
    }
    // Below the one-line header: a usage error, no output.
    let o = keet(&["explain", "--no-llm", "--no-cache", "-f", "context", "--max-tokens", "5", f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--max-tokens 5 is below the smallest report"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A budget for another format is a usage error.
    let o = keet(&["explain", "--no-llm", "--no-cache", "-f", "md", "--max-tokens", "500", f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--max-tokens applies to --format context only"));
}

#[test]
fn compare_context_stays_within_its_budget() {
    if llm_support::skip() {
        return;
    }
    let (tok, _) = keet::llm::tokenizer::for_model(None).expect("the default model's tokenizer");
    let count = |s: &str| tok.encode(s).unwrap().len();
    let before = corpus("rtx3060-sassscope/details.csv");
    let after = corpus("rtx3060-sassscope/raw.csv");
    let (b, a) = (before.to_str().unwrap(), after.to_str().unwrap());
    let full = stdout(&keet(&["compare", b, a, "--no-llm", "-f", "context"]));
    assert!(full.starts_with("# keet compare: "), "{full}");
    assert!(full.contains("## C1 "), "{full}");
    for budget in [60usize, 150, count(&full) + 5] {
        let out = stdout(&keet(&["compare", b, a, "--no-llm", "-f", "context", "--max-tokens", &budget.to_string()]));
        assert!(count(&out) <= budget, "{} tokens for {budget}:\n{out}", count(&out));
        assert!(out.starts_with("# keet compare: "), "{out}");
    }
}

#[test]
fn inspect_has_no_context_format() {
    let f = corpus("rtx4090-lashi/transpose.ncu-rep");
    let o = keet(&["inspect", "-f", "context", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format context is for `keet explain`"));
}
