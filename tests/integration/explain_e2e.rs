//! `keet explain` end to end with the real default model on corpus profiles: the JSON report
//! validates against its schema, every number in the rendered text is in the profile or is a fact
//! keet derived, a repeat run is answered from the cache with identical output, and four processes
//! sharing one cache file lose nothing.
//!
//! The model must be installed (`scripts/install-model.sh`, which `.ci/run` runs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel).display().to_string()
}

fn keet(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(args)
        .env("KEET_CACHE", cache)
        // Pipeline mechanics on the small model; tests/integration/explain_default_model.rs runs the default.
        .env("KEET_MODEL", "smollm2-135m-instruct")
        .output()
        .expect("keet runs")
}

fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

fn schema() -> jsonschema::Validator {
    let s: serde_json::Value = serde_json::from_str(include_str!("../../docs/schema/explain-v2.schema.json")).unwrap();
    jsonschema::validator_for(&s).unwrap()
}

fn assert_valid(doc: &serde_json::Value) {
    let errs: Vec<String> = schema().iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).take(10).collect();
    assert!(errs.is_empty(), "schema errors: {errs:#?}");
}

/// Every number the JSON report holds: metric values as normalised and as written, facts, times.
fn known_numbers(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Number(n) => out.push(n.as_f64().unwrap()),
        serde_json::Value::String(s) => {
            if let Ok(x) = s.replace(',', "").trim().parse::<f64>() {
                out.push(x);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| known_numbers(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| known_numbers(x, out)),
        _ => {}
    }
}

/// Numbers written in text, with their decimal count; digits glued to identifiers are skipped.
fn numbers(text: &str) -> Vec<(String, f64, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < c.len() {
        let ident = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_' || c[i - 1] == '<' || c[i - 1] == '#');
        if c[i].is_ascii_digit() && !ident {
            let s = i;
            while i < c.len() && (c[i].is_ascii_digit() || (matches!(c[i], '.' | ',') && i + 1 < c.len() && c[i + 1].is_ascii_digit())) {
                i += 1;
            }
            // Part of an identifier or a hex/scientific token: skip.
            if i < c.len() && (c[i].is_alphabetic() && !matches!(c[i], 'x') || c[i] == '_') && !text[..].is_empty() {
                let word: String = c[i..].iter().take_while(|ch| ch.is_alphanumeric()).collect();
                if !matches!(word.as_str(), "ns" | "us" | "ms" | "s") {
                    continue;
                }
            }
            let tok: String = c[s..i].iter().collect();
            let decimals = tok.rsplit_once('.').map(|(_, d)| d.len()).unwrap_or(0);
            if let Ok(v) = tok.replace(',', "").parse::<f64>() {
                out.push((tok, v, decimals));
            }
        } else {
            i += 1;
        }
    }
    out
}

fn number_is_known(v: f64, decimals: usize, known: &[f64]) -> bool {
    if v <= 10.0 && v.fract() == 0.0 {
        return true; // ranks, list indices, counts of findings
    }
    let half_ulp = 0.5 * 10f64.powi(-(decimals as i32));
    known.iter().any(|&k| {
        [1.0, 1e-3, 1e-6, 1e-9, 1e3, 1e6].iter().any(|s| {
            let x = k * s;
            (x - v).abs() <= half_ulp.max(1e-9 * v.abs()) || (x != 0.0 && ((x - v) / x).abs() < 5e-3)
        })
    })
}

fn explain_json(args: &[&str], cache: &Path) -> serde_json::Value {
    let mut a = vec!["explain", "--format", "json", "--top", "1", "--max-findings", "1", "--prose", "guided"];
    a.extend_from_slice(args);
    let doc: serde_json::Value = serde_json::from_str(&ok(&keet(&a, cache))).expect("JSON report");
    assert_valid(&doc);
    doc
}

fn check_report(doc: &serde_json::Value) {
    let k = &doc["kernels"][0];
    assert!(doc["model"]["name"].as_str().unwrap().to_lowercase().contains("smollm2"), "{}", doc["model"]);
    let findings = k["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "no findings for {}", k["kernel"]["name"]);
    // Every shown model finding cites real metrics of the launch with their real values.
    let facts = &k["analysis"]["facts"];
    let mut known = vec![];
    known_numbers(facts, &mut known);
    for f in findings {
        assert!(["llm", "llm-repaired", "rules"].contains(&f["origin"].as_str().unwrap()));
        for e in f["evidence"].as_array().unwrap() {
            let v = e["value"].as_f64().unwrap();
            assert!(known.iter().any(|k| (k - v).abs() <= 1e-9 * v.abs().max(1.0)), "cited {e} not among the launch's facts");
        }
        // SmolLM2 writes in guided mode: its sentences carry no numbers (expert text standing in
        // for a replaced one may); the grounded free mode is tested with the default model.
        let to = &f["text_origin"];
        if f["origin"] != "rules" {
            assert!(!to.is_null(), "a model finding says who wrote each sentence: {f}");
        }
        if !to.is_null() {
            for field in ["claim", "explanation"] {
                let t = f[field].as_str().unwrap();
                if to[field] == "model" {
                    assert!(!t.chars().any(|c| c.is_numeric()), "model text with a number: {t}");
                }
            }
        }
    }
}

#[test]
fn h200_details_and_report_with_model_then_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite3");
    let csv = corpus("h200-moe/decode_c1_details.csv");
    let doc = explain_json(&[&csv], &cache);
    check_report(&doc);
    assert_eq!(doc["kernels"][0]["cached"], false);

    // Every number in the rendered text is in the profile or is a fact keet derived (text comes from the cache).
    let text = ok(&keet(&["explain", "--format", "text", "--top", "1", "--max-findings", "1", "--prose", "guided", &csv], &cache));
    let mut known = vec![];
    known_numbers(&doc, &mut known);
    // The diagnosis states headroom as what is left of a unit's peak ("at most 35.5%" beside 64.5%).
    let headroom: Vec<f64> = known.iter().filter(|k| (0.0..=100.0).contains(*k)).map(|k| 100.0 - k).collect();
    known.extend(headroom);
    // The whole-profile section aggregates over every kernel (sums, gains in µs, the launch cost): its
    // numbers are pinned by the unit tests of `rules::profile_view`; the kernels' sections are checked here.
    // So does the sets section, over the profile's launches (pinned by the unit tests of `sets`).
    let first_aggregate = [text.find("Sets:"), text.find("Whole profile")].into_iter().flatten().min();
    let kernels_text = match (first_aggregate, text.find("\n#1 ")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &text[..a], &text[b..]),
        _ => text.clone(),
    };
    // The sets' members and findings follow the kernels.
    let kernels_text = match kernels_text.find("Sets in detail") {
        Some(detail) => kernels_text[..detail].to_string(),
        None => kernels_text,
    };
    let unknown: Vec<String> =
        numbers(&kernels_text).into_iter().filter(|(_, v, d)| !number_is_known(*v, *d, &known)).map(|t| t.0).collect();
    assert!(unknown.is_empty(), "numbers in the report that the profile does not hold: {unknown:?}\n{text}");

    // A repeat run is answered from the cache, with the same content.
    let again = explain_json(&[&csv], &cache);
    assert_eq!(again["kernels"][0]["cached"], true);
    assert_eq!(again["kernels"][0]["findings"], doc["kernels"][0]["findings"]);
    assert_eq!(again["kernels"][0]["verdict"], doc["kernels"][0]["verdict"]);

    // The binary report of the same run.
    let rep = explain_json(&[&corpus("h200-moe/decode_c1.ncu-rep")], &cache);
    check_report(&rep);
}

#[test]
fn rtx4090_textbook_kernels_with_model() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite3");
    let doc = explain_json(&[&corpus("rtx4090-lashi/reduceInteger.csv")], &cache);
    check_report(&doc);
    let html = ok(&keet(
        &[
            "explain",
            "--format",
            "html",
            "--top",
            "1",
            "--max-findings",
            "1",
            "--prose",
            "guided",
            &corpus("rtx4090-lashi/reduceInteger.csv"),
        ],
        &cache,
    ));
    assert!(html.contains("<html") && !html.contains("https://"), "HTML report is not self-contained");
}

#[test]
fn four_processes_share_one_cache_file() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite3");
    let inputs: Vec<String> = [
        "h200-moe/decode_c1_details.csv",
        "h200-moe/sglang_short_decode_raw.csv",
        "rtx4090-lashi/reduceInteger.csv",
        "cc86-esmm/metrics.csv",
    ]
    .iter()
    .map(|p| corpus(p))
    .collect();
    let children: Vec<_> = inputs
        .iter()
        .map(|p| {
            Command::new(env!("CARGO_BIN_EXE_keet"))
                .args(["explain", "--no-llm", "--format", "json", "--top", "10", p])
                .env("KEET_CACHE", &cache)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut expected = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        let doc: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
        expected += doc["kernels"].as_array().unwrap().len();
    }
    let hist = ok(&keet(&["history", "--format", "json", "--limit", "1000"], &cache));
    let rows: serde_json::Value = serde_json::from_str(&hist).unwrap();
    let n = rows["analyses"].as_array().expect("history lists analyses").len();
    assert_eq!(n, expected, "entries lost: {hist}");
}

#[test]
fn no_llm_needs_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(["explain", "--no-llm", "--no-cache", "--format", "md", &corpus("rtx3060-sassscope/details.csv")])
        .env("KEET_DATA_DIR", dir.path())
        .env("HF_HOME", dir.path())
        .output()
        .unwrap();
    let md = ok(&out);
    assert!(md.contains("probe_timer_only") && md.contains("grid-too-small"), "{md}");
}

#[test]
fn source_page_is_attached_and_hot_lines_found() {
    // The details page and the CUDA+SASS source page of the same launch: the source view is
    // attached to the kernel (not explained on its own), and its hottest CUDA lines are found.
    let read = |p: &str| keet::profile::read_path(Path::new(&corpus(p))).unwrap();
    let profiles = keet::explain::source::attach_source_views(vec![
        read("rtx3060-sassscope/details.csv"),
        read("rtx3060-sassscope/source_cuda_sass.csv"),
    ]);
    let groups = keet::batch::group_kernels(&profiles);
    assert_eq!(groups.len(), 1, "the source page is attached, not a kernel of its own");
    let launch = groups[0].launch(&profiles);
    let lines = keet::explain::source::hot_lines(launch, &[]);
    assert!(!lines.is_empty(), "no hot lines");
    for l in &lines {
        assert!(l.line.is_some() && !l.text.is_empty() && l.share_pct > 0.0, "{l:?}");
    }
    // Line-level categories point at them; launch-shape categories do not.
    use keet::rules::Category;
    assert!(!keet::explain::source::lines_for(Category::MemoryCoalescing, &lines).is_empty());
    assert!(keet::explain::source::lines_for(Category::GridTooSmall, &lines).is_empty());
    // A --source file supplies the text for the profile's line numbers.
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("probe_kernels.cu");
    std::fs::write(&cu, (1..=200).map(|i| format!("// line {i}\n")).collect::<String>()).unwrap();
    let with_src = keet::explain::source::hot_lines(launch, &[cu]);
    assert_eq!(with_src[0].text, format!("// line {}", with_src[0].line.unwrap()));
}

/// Issue 37: a report's SASS counters, placed on source lines through the cubin's line table, are
/// summed per line, and each hot line carries its own stall, excessive-sector and instruction counts.
#[test]
fn sass_counters_are_summed_per_source_line_with_each_lines_counts() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus-next/rtx4090-speedymatmul/naive.ncu-rep");
    let profile = keet::profile::read_path(&path).unwrap();
    let lines = keet::explain::source::hot_lines(&profile.launches[0], &[]);
    let places: Vec<(Option<&str>, Option<u64>)> = lines.iter().map(|l| (l.file.as_deref(), l.line)).collect();
    let mut unique = places.clone();
    unique.dedup();
    assert_eq!(places, unique, "one entry per source line");
    // The naive SGEMM's inner product line `sum += A[x * K + i] * B[i * N + y]` (1_naive.cuh:21).
    let hot = &lines[0];
    assert!(hot.file.as_deref().is_some_and(|f| f.ends_with("1_naive.cuh")) && hot.line == Some(21), "{hot:?}");
    assert!(hot.share_pct > 80.0, "{hot:?}");
    let count = |label: &str| hot.counters.iter().find(|c| c.counter == label).map(|c| c.share_pct);
    assert!(count("L2 Theoretical Sectors Global Excessive").is_some_and(|p| p > 99.0), "{hot:?}");
    assert!(count("Instructions Executed").is_some_and(|p| p > 50.0 && p < 90.0), "{hot:?}");
    assert!(hot.counters.iter().all(|c| c.value > 0.0 && c.share_pct <= 100.0));
}

#[test]
fn missing_model_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(["explain", "--no-cache", &corpus("rtx3060-sassscope/details.csv")])
        .env("KEET_DATA_DIR", dir.path())
        .env("HF_HOME", dir.path())
        .env("HF_HUB_CACHE", dir.path())
        .env_remove("KEET_MODEL")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("install"), "{err}");
}

#[allow(dead_code)]
fn unused(_: PathBuf) {}
