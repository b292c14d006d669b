//! The expert's labels on the real corpus (`../shared/corpus/LABELS.toml`), checked as
//! `../shared/bench/quality.py` checks them, so CI keeps them:
//!
//! * labels: each `[[k]]` entry's primary finding (first above info, else first), `must` and `must_not`;
//! * twins: the estimate for a fixed twin's category lies within
//!   `[saved - 10, max(2 x saved, saved + 15)]` of the measured saving;
//! * physics: on every launch of every corpus profile, no finding above info claims more than the
//!   headroom of the busiest unit its fix does not relieve (+5 points, as the script allows), and no
//!   throughput fact exceeds 100.5%.
//!
//! The bound check uses its own table of which units each category relieves (the script's), not
//! keet's, so the test cannot grade keet with keet's own assumptions.

use keet::analysis::{analyse_profile, LaunchAnalysis};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus")
}

/// The second labelled set: 14 reports from 10 further public repositories (V100 to RTX 5060 Ti).
fn corpus_next() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus-next")
}

/// Real sets (version series, block shapes, sizes) from further repositories; their verdicts live in
/// this repository (`fixtures/corpus-sets/LABELS.toml`), the profiles in `../shared/corpus-sets`.
fn corpus_sets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus-sets")
}

#[derive(Deserialize)]
struct Labels {
    k: Vec<Label>,
    #[serde(default)]
    twin: Vec<Twin>,
}

#[derive(Deserialize)]
struct Label {
    file: String,
    name: String,
    #[serde(default)]
    primary: Vec<String>,
    #[serde(default)]
    must: Vec<String>,
    #[serde(default)]
    must_not: Vec<String>,
}

#[derive(Deserialize)]
struct Twin {
    file: String,
    /// The fixed kernel's report, when it is not `file`.
    #[serde(default)]
    good_file: Option<String>,
    bad: String,
    good: String,
    category: String,
}

fn launches(root: &Path, rel: &str, cache: &mut HashMap<String, Vec<LaunchAnalysis>>) -> Vec<LaunchAnalysis> {
    cache
        .entry(rel.to_string())
        .or_insert_with(|| {
            let p = keet::profile::read_path(&root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            analyse_profile(&p).launches
        })
        .clone()
}

fn real(l: &LaunchAnalysis) -> Vec<&keet::rules::Finding> {
    l.findings.iter().filter(|f| f.severity != keet::rules::Severity::Info).collect()
}

/// The script's table: which unit groups each category's fix relieves; absent categories are not bounded.
fn relieves(cat: &str) -> Option<&'static [&'static str]> {
    match cat {
        "occupancy-registers" | "occupancy-shared-memory" | "occupancy-other" | "grid-too-small" | "tail-effect" | "block-size" => {
            Some(&[])
        }
        // Shared memory is inside the SM; its wavefronts load the L1/shared pipe.
        "shared-bank-conflicts" => Some(&["sm", "l1"]),
        "divergence" | "fp64" | "tensor-core-unused" => Some(&["sm"]),
        _ => None,
    }
}

#[test]
fn corpus_matches_the_expert_labels_twins_and_physics() {
    check(&corpus(), 100, 20);
}

#[test]
fn corpus_next_matches_the_expert_labels_twins_and_physics() {
    check(&corpus_next(), 50, 10);
}

#[test]
fn corpus_sets_match_the_expert_labels_twins_and_physics() {
    let labels = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/corpus-sets/LABELS.toml");
    check_with(&corpus_sets(), &labels, 30, 10);
}

/// Every label, twin and bound of one labelled folder; at least `min_checks` label checks and more
/// than `min_bounded` bound-checked estimates must run.
fn check(root: &Path, min_checks: usize, min_bounded: usize) {
    check_with(root, &root.join("LABELS.toml"), min_checks, min_bounded)
}

/// [`check`] with the labels read from `labels_path` (paths in it relative to `root`).
fn check_with(root: &Path, labels_path: &Path, min_checks: usize, min_bounded: usize) {
    let labels: Labels = toml::from_str(&std::fs::read_to_string(labels_path).expect("LABELS.toml")).expect("labels parse");
    let mut cache = HashMap::new();
    let mut fails: Vec<String> = Vec::new();
    let mut checks = 0;

    for e in &labels.k {
        let ls = launches(root, &e.file, &mut cache);
        let hits: Vec<_> = ls.iter().filter(|l| l.name.contains(&e.name)).collect();
        assert!(!hits.is_empty(), "{}: no launch named like {:?}", e.file, e.name);
        for l in hits {
            let r = real(l);
            let prim = r.first().copied().or(l.findings.first()).map(|f| f.category.as_str());
            let all: Vec<&str> = l.findings.iter().map(|f| f.category.as_str()).collect();
            let above: Vec<&str> = r.iter().map(|f| f.category.as_str()).collect();
            if !e.primary.is_empty() {
                checks += 1;
                if !prim.is_some_and(|p| e.primary.iter().any(|x| x == p)) {
                    fails.push(format!("{} {}: primary {:?}, expected one of {:?}", e.file, l.name, prim, e.primary));
                }
            }
            for c in &e.must {
                checks += 1;
                if !all.contains(&c.as_str()) {
                    fails.push(format!("{} {}: {c} not reported", e.file, l.name));
                }
            }
            for c in &e.must_not {
                checks += 1;
                if above.contains(&c.as_str()) {
                    fails.push(format!("{} {}: {c} reported above info", e.file, l.name));
                }
            }
        }
    }

    for t in &labels.twin {
        let ls = launches(root, &t.file, &mut cache);
        let gls = launches(root, t.good_file.as_deref().unwrap_or(&t.file), &mut cache);
        let bad = ls.iter().find(|l| l.name.contains(&t.bad)).expect("bad twin launch");
        let good = gls.iter().find(|l| l.name.contains(&t.good)).expect("good twin launch");
        let (tb, tg) = (bad.duration_ns.expect("duration"), good.duration_ns.expect("duration"));
        let saved = 100.0 * (tb - tg) / tb;
        let pred =
            bad.findings.iter().filter(|f| f.category.as_str() == t.category).filter_map(|f| f.estimated_speedup_pct).fold(0.0, f64::max);
        checks += 1;
        if !(saved - 10.0 <= pred && pred <= (2.0 * saved).max(saved + 15.0)) {
            fails.push(format!("twin {} -> {}: {} estimated {pred:.1}%, the fixed twin saved {saved:.1}%", t.bad, t.good, t.category));
        }
    }

    // Physics on every corpus profile keet reads, labelled or not.
    let mut files: Vec<String> = Vec::new();
    for dir in std::fs::read_dir(root).expect("corpus dir").flatten().filter(|d| d.path().is_dir()) {
        for f in std::fs::read_dir(dir.path()).expect("corpus subdir").flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if (name.ends_with(".ncu-rep") || name.ends_with(".csv"))
                && !name.starts_with("source_")
                && !name.contains("ui_raw")
                && !name.contains("prof_lines")
            {
                files.push(format!("{}/{name}", dir.file_name().to_string_lossy()));
            }
        }
    }
    files.sort();
    let mut bounded = 0;
    for rel in &files {
        for l in launches(root, rel, &mut cache) {
            let facts = serde_json::to_value(&l.facts).expect("facts serialise");
            let val = |k: &str| facts.get(k).and_then(|f| f.get("value")).and_then(|v| v.as_f64());
            let mut units: BTreeMap<&str, f64> = BTreeMap::new();
            // ncu's Memory Throughput is the busiest of L1, L2 and DRAM: with L1 known, memory is L2/DRAM alone.
            let mem_keys: &[&str] = if val("l1_throughput_pct").is_some() {
                &["dram_throughput_pct", "l2_throughput_pct"]
            } else {
                &["memory_throughput_pct", "dram_throughput_pct", "l2_throughput_pct"]
            };
            for (group, keys) in [("sm", &["sm_throughput_pct"][..]), ("l1", &["l1_throughput_pct"][..]), ("mem", mem_keys)] {
                if let Some(m) = keys.iter().filter_map(|k| val(k)).map(|v| v.min(100.0)).reduce(f64::max) {
                    units.insert(group, m);
                }
            }
            for (k, f) in facts.as_object().expect("facts object") {
                if k.contains("throughput") && f.get("unit").and_then(|u| u.as_str()) == Some("%") {
                    if let Some(v) = f.get("value").and_then(|v| v.as_f64()).filter(|v| *v > 100.5) {
                        fails.push(format!("{rel} {}: {k} = {v:.1}% (a measurement artefact reported as a fact)", l.name));
                    }
                }
            }
            for f in real(&l) {
                let (Some(rel_units), Some(est)) = (relieves(f.category.as_str()), f.estimated_speedup_pct) else { continue };
                let limit = units.iter().filter(|(u, _)| !rel_units.contains(u)).map(|(_, v)| *v).reduce(f64::max);
                if let Some(m) = limit {
                    bounded += 1;
                    if est > 100.0 - m + 5.0 {
                        fails.push(format!(
                            "{rel} {}: {} claims {est:.0}% but the busiest unit it does not relieve is at {m:.0}%",
                            l.name,
                            f.category.as_str()
                        ));
                    }
                }
            }
        }
    }
    assert!(checks >= min_checks, "only {checks} label checks ran: is LABELS.toml complete?");
    assert!(bounded > min_bounded, "only {bounded} estimates were bound-checked");
    assert!(fails.is_empty(), "{} of {checks} checks failed:\n{}", fails.len(), fails.join("\n"));
}
