//! The cache end to end on a real corpus profile (rule-only analyses, no model): `keet explain`'s
//! stage stores every kernel, a repeat run answers from the cache, `--refresh` replaces, and
//! `keet history` / `keet show` print what was stored — `show` renders exactly what `explain`
//! renders for that kernel. Bad ids and bad cache files exit 2 with a clear message.

use keet::explain::report::{ExplainReport, EXPLAIN_SCHEMA};
use keet::explain::{explain, ExplainOptions, ReportSettings, RunOptions};
use keet::render::explain::render_explain;
use keet::render::Format;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

fn keet(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet"))
        .args(args)
        .env("KEET_CACHE", cache)
        .env("KEET_MODEL", "smollm2-135m-instruct")
        .output()
        .expect("keet runs")
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "keet failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn opts(cache: &Path) -> ExplainOptions {
    ExplainOptions {
        settings: ReportSettings { no_llm: true, top: 3, ..ReportSettings::default() },
        run: RunOptions { cache: Some(cache.to_path_buf()), ..RunOptions::default() },
        ..ExplainOptions::default()
    }
}

#[test]
fn explain_stores_show_prints_the_same_report_and_history_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("analyses.sqlite3");
    let input = corpus("rtx4090-lashi/reduceInteger.csv");

    let (report, stats) = explain(std::slice::from_ref(&input), &opts(&cache)).expect("explain (rules only)");
    let n = report.kernels.len();
    assert!(n >= 2, "{n} kernels");
    assert_eq!(stats.kernels_from_cache, 0);
    assert!(report.kernels.iter().all(|k| !k.cached && k.cache_id.is_some()));

    // A repeat run answers every kernel from the cache, with the same entries.
    let (again, stats) = explain(std::slice::from_ref(&input), &opts(&cache)).unwrap();
    assert_eq!(stats.kernels_from_cache, n);
    for (a, b) in report.kernels.iter().zip(&again.kernels) {
        assert!(b.cached);
        assert_eq!(a.cache_id, b.cache_id);
        assert_eq!(a.findings, b.findings);
        assert_eq!(a.verdict, b.verdict);
    }

    // `keet show ID` renders what `keet explain` renders for that one kernel (marked cached).
    for k in &report.kernels {
        let id = k.cache_id.unwrap();
        let mut shown = k.clone();
        shown.cached = true;
        let single = ExplainReport {
            schema: EXPLAIN_SCHEMA.into(),
            keet_version: env!("CARGO_PKG_VERSION").into(),
            model: None,
            inputs: k.kernel.files.clone(),
            total_duration_ns: k.kernel.total_duration_ns,
            kernels: vec![shown],
            skipped_kernels: 0,
            errors: vec![],
            profile: Default::default(),
            settings: None,
            batch: None,
            prose_mode: None,
            prose: Default::default(),
            summary: None,
            sets: vec![],
        };
        for (fmt, format) in [("text", Format::Text), ("md", Format::Md)] {
            let out = stdout(&keet(&["show", &id.to_string(), "--format", fmt], &cache));
            assert_eq!(out, render_explain(&single, format).unwrap(), "keet show {id} --format {fmt}");
        }
        let json: serde_json::Value = serde_json::from_str(&stdout(&keet(&["show", &id.to_string(), "--format", "json"], &cache))).unwrap();
        assert_eq!(json, serde_json::to_value(&single).unwrap());
        // Text is the default; --cache overrides KEET_CACHE.
        let out = Command::new(env!("CARGO_BIN_EXE_keet"))
            .args(["show", &id.to_string(), "--cache"])
            .arg(&cache)
            .env("KEET_CACHE", dir.path().join("elsewhere.sqlite3"))
            .output()
            .unwrap();
        assert_eq!(stdout(&out), render_explain(&single, Format::Text).unwrap());
    }

    // History: newest first, one row per kernel, rule-only model.
    let hist: serde_json::Value = serde_json::from_str(&stdout(&keet(&["history", "--format", "json"], &cache))).unwrap();
    assert_eq!(hist["schema"], "keet.history/1");
    let rows = hist["analyses"].as_array().unwrap();
    assert_eq!(rows.len(), n);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    let mut want: Vec<i64> = report.kernels.iter().map(|k| k.cache_id.unwrap()).collect();
    want.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids, want);
    for r in rows {
        let k = report.kernels.iter().find(|k| k.cache_id == r["id"].as_i64()).unwrap();
        assert_eq!(r["kernel"], k.kernel.name.as_str());
        assert_eq!(r["verdict"], k.verdict.as_str());
        assert_eq!(r["file"], input.display().to_string().as_str());
        assert!(r["created_utc"].as_str().unwrap().ends_with('Z'));
    }
    let text = stdout(&keet(&["history"], &cache));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), n + 1, "{text}");
    assert!(lines[0].starts_with("ID") && lines[0].contains("VERDICT") && lines[0].contains("KERNEL"), "{text}");
    assert!(lines[1].trim_start().starts_with(&ids[0].to_string()), "{text}");
    assert_eq!(stdout(&keet(&["history", "--limit", "1"], &cache)).lines().count(), 2);
    let first = &report.kernels[0].kernel.name;
    let filtered: serde_json::Value =
        serde_json::from_str(&stdout(&keet(&["history", "--format", "json", first.as_str()], &cache))).unwrap();
    assert!(filtered["analyses"].as_array().unwrap().iter().all(|r| r["kernel"].as_str().unwrap().contains(first.as_str())));
    assert!(!filtered["analyses"].as_array().unwrap().is_empty());
    assert!(stdout(&keet(&["history", "no-such-kernel-anywhere"], &cache)).contains("No analyses match"));

    // --refresh recomputes and replaces: same number of entries, new ids.
    let mut refreshed = opts(&cache);
    refreshed.run.refresh = true;
    let (r3, stats) = explain(std::slice::from_ref(&input), &refreshed).unwrap();
    assert_eq!(stats.kernels_from_cache, 0);
    let cache_db = keet::cache::Cache::open(&cache).unwrap();
    assert_eq!(cache_db.len().unwrap(), n);
    for (old, new) in report.kernels.iter().zip(&r3.kernels) {
        assert!(new.cache_id.unwrap() > old.cache_id.unwrap());
        assert!(cache_db.show(old.cache_id.unwrap()).unwrap().is_none());
    }
}

#[test]
fn bad_ids_and_bad_cache_files_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("never-written.sqlite3");
    // No cache yet: history says so (exit 0, nothing created); show exits 2.
    let out = keet(&["history"], &missing);
    assert!(stdout(&out).contains("No analyses yet"));
    let out = keet(&["history", "--format", "json"], &missing);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["analyses"].as_array().unwrap().len(), 0);
    assert!(!missing.exists(), "read-only commands must not create the cache");
    let out = keet(&["show", "1"], &missing);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no analysis with id 1"));

    // An existing cache without that id.
    let cache = dir.path().join("c.sqlite3");
    keet::cache::Cache::open(&cache).unwrap();
    let out = keet(&["show", "424242"], &cache);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no analysis with id 424242") && err.contains(&cache.display().to_string()), "{err}");
    assert_eq!(keet(&["show", "not-a-number"], &cache).status.code(), Some(2));

    // A file that is not a keet cache: clear message naming it, exit 2, file untouched.
    let junk = dir.path().join("junk.sqlite3");
    let bytes = b"definitely not sqlite\n".repeat(500);
    std::fs::write(&junk, &bytes).unwrap();
    for args in [&["history"][..], &["show", "1"][..]] {
        let out = keet(args, &junk);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&junk.display().to_string()) && err.contains("not a keet cache"), "{err}");
    }
    assert_eq!(std::fs::read(&junk).unwrap(), bytes);
}
