//! Sets of profiles (issue 41) on real sets: `../shared/corpus-sets` with its `MANIFEST.tsv` as
//! the expected grouping and what varies, and the speedymatmul series in `../shared/corpus-next`.
//! The fastest member is checked against the members' own `gpu__time_duration` metrics; a regime
//! change point, a pair differing in two things (refused), a broken member file, the JSON schema
//! and HTML plot of `keet explain`, and `keet compare` pairing a kernel renamed in a fix.

use keet::sets::{self, KernelSet, SetOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared").join(rel)
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    keet::profile::expand_inputs(&[dir.to_path_buf()]).expect("lists the folder")
}

fn sets_in(rel: &str) -> Vec<KernelSet> {
    sets::find(&files_in(&shared(rel)), &SetOptions::default()).0
}

fn keet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keet")).args(args).output().expect("run keet")
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// MANIFEST.tsv rows: (set, file name, kernel, varies).
fn manifest() -> Vec<(String, String, String, String)> {
    let text = std::fs::read_to_string(shared("corpus-sets/MANIFEST.tsv")).expect("corpus-sets/MANIFEST.tsv");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (set, file, kernel, varies) = (col("set"), col("file"), col("kernel"), col("varies"));
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            (c[set].to_string(), file_name(Path::new(c[file])), c[kernel].to_string(), c[varies].to_string())
        })
        .collect()
}

#[test]
fn grouping_and_what_varies_match_the_manifest() {
    let rows = manifest();
    let mut names: Vec<&String> = rows.iter().map(|r| &r.0).collect();
    names.dedup();
    assert_eq!(names.len(), 4, "four sets in the manifest");
    for set in names {
        let expected: Vec<&(String, String, String, String)> = rows.iter().filter(|r| &r.0 == set).collect();
        let found = sets_in(&format!("corpus-sets/{set}"));
        // The smallest set holding every manifest member (the reduction's simpleReduce1 members are
        // also in the version x file set of both reductions).
        let hit = found
            .iter()
            .filter(|s| {
                expected.iter().all(|e| s.members.iter().any(|m| file_name(&m.file) == e.1 && sets::names::parse(&m.kernel).base == e.2))
            })
            .min_by_key(|s| s.members.len());
        let s = hit.unwrap_or_else(|| {
            panic!(
                "{set}: no set holds every manifest member; found {:?}",
                found.iter().map(|s| (&s.name, s.members.len())).collect::<Vec<_>>()
            )
        });
        assert_eq!(s.members.len(), expected.len(), "{set}: members {:?}", s.members.iter().map(|m| &m.value).collect::<Vec<_>>());
        match expected[0].3.as_str() {
            "version" => assert!(s.varies.contains(&"version".to_string()), "{set}: varies {:?}", s.varies),
            "config" => {
                assert!(!s.varies.is_empty() && !s.varies.contains(&"version".to_string()), "{set}: varies {:?}", s.varies);
                let config = ["launch shape", "problem size", "template parameters"];
                assert!(s.varies.iter().all(|v| config.contains(&v.as_str())), "{set}: varies {:?}", s.varies);
            }
            other => panic!("{set}: unknown varies {other}"),
        }
    }
}

#[test]
fn the_reduction_varies_block_then_problem_size_and_refuses_the_two_thing_pair() {
    let found = sets_in("corpus-sets/rtx3080laptop-reduce-config");
    let s = found.iter().find(|s| s.name == "simpleReduce1").expect("the simpleReduce1 set");
    assert_eq!(s.varies, vec!["launch shape".to_string(), "problem size".to_string()]);
    let files: Vec<String> = s.members.iter().map(|m| file_name(&m.file)).collect();
    assert_eq!(files, vec!["report.ncu-rep", "report2.ncu-rep", "report3.ncu-rep"]);
    let pair = |a: usize, b: usize| s.pairs.iter().find(|p| p.a == a && p.b == b).unwrap();
    assert!(pair(1, 2).used && pair(1, 2).differs == vec!["launch shape".to_string()]);
    assert!(pair(2, 3).used && pair(2, 3).differs == vec!["problem size".to_string()]);
    // report (block 32, ~1M) and report3 (block 128, ~1G) differ in two things: not used.
    assert!(!pair(1, 3).used && pair(1, 3).differs.len() == 2, "{:?}", pair(1, 3));
    let text: Vec<&str> = s.findings.iter().map(|f| f.text.as_str()).collect();
    assert!(text.iter().any(|t| t.contains("not used: #1 and #3 differ in launch shape and problem size")), "{text:#?}");
    // The scaling line compares time with the work (threads x1000) from the one-factor pair.
    assert!(text.iter().any(|t| t.contains("problem size only") && t.contains("threads x1000")), "{text:#?}");
}

/// The member's duration as the profile writes it (`gpu__time_duration.sum`, ns).
fn raw_duration(file: &Path, launch: u32) -> f64 {
    let p = keet::profile::read_path(file).unwrap();
    let m = p.launches[launch as usize].metrics.get("gpu__time_duration.sum").expect("duration metric");
    let v = m.as_f64().unwrap();
    if m.raw_unit.contains("usecond") {
        v * 1e3
    } else if m.raw_unit.contains("msecond") {
        v * 1e6
    } else {
        v
    }
}

#[test]
fn the_fastest_gemm_version_is_the_one_with_the_least_time() {
    let found = sets_in("corpus-sets/rtx3080-gemm-versions");
    let s = found.iter().find(|s| s.name == "gemm").expect("the gemm set");
    let times: Vec<(String, f64)> = s.members.iter().map(|m| (file_name(&m.file), raw_duration(&m.file, m.launch))).collect();
    let best = times.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    let f = s.fastest.as_ref().unwrap();
    assert_eq!(file_name(&f.file), best.0, "{times:?}");
    assert_eq!(best.0, "gemm_v7_alter.ncu-rep");
    // In version order, from the file names' version marks.
    let order: Vec<&str> = s.members.iter().map(|m| m.value.as_str()).collect();
    assert_eq!(order, vec!["v1_alter", "v1_alter_1", "v7_alter", "v8_alter", "v9_alter"]);
}

#[test]
fn a_version_series_across_files_shows_where_the_regime_changes() {
    let found = sets_in("corpus-next/rtx4090-speedymatmul");
    assert_eq!(found.len(), 1, "{:?}", found.iter().map(|s| &s.name).collect::<Vec<_>>());
    let s = &found[0];
    assert_eq!((s.name.as_str(), s.members.len()), ("sgemm", 3));
    assert_eq!(s.varies, vec!["version".to_string()]);
    // Every regime change is between neighbours whose analysed regimes differ, at the later one.
    let regime_changes: Vec<&sets::Change> = s.changes.iter().filter(|c| c.what == "regime").collect();
    assert!(!regime_changes.is_empty(), "naive (memory-bound) and coalescing (latency-bound) differ");
    for c in regime_changes {
        let at = s.members.iter().position(|m| m.value == c.at_value).unwrap();
        assert!(at > 0 && s.members[at - 1].value == c.from_value);
        assert_ne!(s.members[at - 1].regime, s.members[at].regime);
        assert!(c.after.starts_with(s.members[at].regime));
    }
    let first = s.members.iter().find(|m| m.kernel.starts_with("sgemm_naive")).unwrap();
    let second = s.members.iter().find(|m| m.kernel.starts_with("sgemm_global_memory_coalescing")).unwrap();
    assert_eq!((first.regime, second.regime), ("memory-bound", "latency-bound"));
}

#[test]
fn a_broken_member_file_is_reported_and_the_set_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    for f in files_in(&shared("corpus-sets/rtx3080-gemm-versions")) {
        std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(dir.path().join("gemm_v10_alter.ncu-rep"), b"NVR\0not a report").unwrap();
    let o = keet(&["explain", "--no-llm", "--no-cache", "-f", "json", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "a bad file exits 2: {}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["errors"].as_array().unwrap().iter().any(|e| e["path"].as_str().unwrap().ends_with("gemm_v10_alter.ncu-rep")));
    let gemm = doc["sets"].as_array().unwrap().iter().find(|s| s["name"] == "gemm").expect("the gemm set goes on");
    assert_eq!(gemm["members"].as_array().unwrap().len(), 5);
}

#[test]
fn explain_json_has_sets_in_the_schema_and_html_plots_them() {
    let dir = shared("corpus-sets/rtx3080laptop-reduce-config");
    let o = keet(&["explain", "--no-llm", "--no-cache", "-f", "json", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../../docs/schema/explain-v2.schema.json")).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let sets = doc["sets"].as_array().unwrap();
    assert!(!sets.is_empty());
    for s in sets {
        assert!(s["varies"].is_array() && s["fastest"]["file"].is_string() && s["fastest"]["kernel"].is_string());
        for m in s["members"].as_array().unwrap() {
            for key in ["file", "kernel", "value", "duration_ns", "regime", "bound_unit", "bound_pct"] {
                assert!(m.get(key).is_some(), "member without {key}: {m}");
            }
        }
    }
    let html = keet(&["explain", "--no-llm", "--no-cache", "-f", "html", dir.to_str().unwrap()]);
    let page = String::from_utf8(html.stdout).unwrap();
    assert!(page.contains("<h2>Sets</h2>") && page.contains("busiest unit's % of peak"), "the set section and its plot");
    let text = String::from_utf8(keet(&["explain", "--no-llm", "--no-cache", dir.to_str().unwrap()]).stdout).unwrap();
    // The sets' summaries at the top, their members and findings after the kernels.
    let (top, detail) = (text.find("Sets: ").expect("set summaries"), text.find("Sets in detail").expect("set details"));
    let first_kernel = text.find("\n#1  ").expect("a kernel");
    assert!(top < first_kernel && first_kernel < detail, "{text}");
    assert!(text[detail..].contains("varies launch shape, problem size"), "{text}");
    // --vary reads a value from the path: the file names are the value here.
    let vary = keet(&["explain", "--no-llm", "--no-cache", "-f", "json", "--vary", "R=(report\\d?)", dir.to_str().unwrap()]);
    let doc: Value = serde_json::from_slice(&vary.stdout).unwrap();
    let s = doc["sets"].as_array().unwrap().iter().find(|s| s["name"] == "simpleReduce1").unwrap();
    assert_eq!(s["varies"], serde_json::json!(["R"]));
    assert_eq!(s["members"][0]["value"], "R=report");
}

#[test]
fn compare_pairs_a_kernel_renamed_in_a_fix_and_explains_the_saving() {
    let dir = shared("corpus-next/rtx4090-speedymatmul");
    let (naive, coalescing) = (dir.join("naive.ncu-rep"), dir.join("coalescing.ncu-rep"));
    let o = keet(&["compare", "--no-llm", "-f", "json", naive.to_str().unwrap(), coalescing.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["only_before"].as_array().unwrap().len(), 0);
    assert_eq!(doc["only_after"].as_array().unwrap().len(), 0);
    let k = &doc["matched"][0];
    assert_eq!(k["match_kind"], "role");
    let reason = k["match_reason"].as_str().unwrap();
    assert!(reason.contains("name stem `sgemm`") && reason.contains("same work"), "{reason}");
    // The saving and what explains it: coalesced loads (bytes used per sector up) and the
    // coalescing problem gone.
    assert!(k["total_time"]["delta_pct"].as_f64().unwrap() < -10.0);
    let bytes = k["metrics"].as_array().unwrap().iter().find(|m| m["key"] == "global_load_bytes_per_sector").unwrap();
    assert!(bytes["after"].as_f64().unwrap() > 4.0 * bytes["before"].as_f64().unwrap(), "{bytes}");
    assert!(k["categories_disappeared"].as_array().unwrap().iter().any(|c| c == "memory-coalescing"));
    let text = String::from_utf8(keet(&["compare", "--no-llm", naive.to_str().unwrap(), coalescing.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("match: role (renamed: the same name stem `sgemm`"), "{text}");
    // --match names a pair keet would not make by role.
    let tiled = dir.join("blocktiling_2d.ncu-rep");
    let o = keet(&["compare", "--no-llm", "-f", "json", "--match", "naive=blocktiling", naive.to_str().unwrap(), tiled.to_str().unwrap()]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["matched"][0]["match_kind"], "user");
    assert_eq!(doc["matched"][0]["match_reason"], "--match naive=blocktiling");
}

/// Gets the text report of `rel` (a file or folder under `../shared`).
fn text_of(rel: &str) -> String {
    let o = keet(&["explain", "--no-llm", "--no-cache", shared(rel).to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn the_reduction_sweep_is_one_version_set_with_the_version_effect_at_each_launch() {
    let found = sets_in("corpus-sets/rtx3080laptop-reduce-config");
    let versions: Vec<&KernelSet> = found.iter().filter(|s| s.kind == sets::SetKind::Versions).collect();
    assert_eq!(
        versions.len(),
        1,
        "one version set, not one per file: {:?}",
        found.iter().map(|s| (&s.name, s.members.len())).collect::<Vec<_>>()
    );
    let s = versions[0];
    assert_eq!(s.name, "simpleReduce");
    assert_eq!(s.varies, vec!["version".to_string(), "launch shape".to_string(), "problem size".to_string()]);
    let members: Vec<(String, String)> = s.members.iter().map(|m| (file_name(&m.file), m.base())).collect();
    let expected: Vec<(String, String)> = ["report.ncu-rep", "report2.ncu-rep", "report3.ncu-rep"]
        .iter()
        .flat_map(|f| ["simpleReduce1", "simpleReduce2"].map(|k| (f.to_string(), k.to_string())))
        .collect();
    assert_eq!(members, expected, "(version x file), each file's versions together");
    // The per-kernel sweeps stay.
    assert!(found.iter().any(|s| s.name == "simpleReduce1" && s.members.len() == 3));
    // Only the pairs in one file (the version alone) estimate the version's effect.
    for p in s.pairs.iter().filter(|p| p.differs.contains(&"version".to_string())) {
        let same_file = s.members[p.a - 1].file == s.members[p.b - 1].file;
        assert_eq!(p.used, same_file, "{p:?}");
    }
    let effect = s.findings.iter().find(|f| f.kind == "effect").expect("the version's effect").text.clone();
    assert!(effect.starts_with("simpleReduce1 -> simpleReduce2, from the 3 pairs that differ in the version alone:"), "{effect}");
    assert!(effect.contains("Not used: the 6 pairs that differ in the version and the launch shape or problem size."), "{effect}");
    // Each launch's figure from the members' own gpu__time_duration.
    for file in ["report.ncu-rep", "report2.ncu-rep", "report3.ncu-rep"] {
        let at = |kernel: &str| s.members.iter().find(|m| file_name(&m.file) == file && m.base() == kernel).unwrap();
        let (one, two) = (at("simpleReduce1"), at("simpleReduce2"));
        let (t1, t2) = (raw_duration(&one.file, one.launch), raw_duration(&two.file, two.launch));
        let launch = one.value.trim_start_matches("simpleReduce1, ");
        let said = format!("{}% less time at {launch} (", keet::rules::fmt_num(100.0 * (t1 - t2) / t1));
        assert!(effect.contains(&said), "{said} in {effect}");
    }
    assert!(s.summary.contains("Where only the version differs, simpleReduce2 takes"), "{}", s.summary);
    // No step along the order: its neighbours differ in the version and the launch.
    assert!(s.findings.iter().all(|f| f.kind != "step"), "{:?}", s.findings);
}

#[test]
fn a_two_member_set_says_both_and_its_values_keep_what_tells_them_apart() {
    let text = text_of("corpus/h200-moe/decode_c1.ncu-rep");
    assert!(text.contains("2 members, varying library configuration"), "{text}");
    assert!(!text.contains("All 2 members") && !text.contains("1 of 1 pairs"), "{text}");
    let top = &text[..text.find("Whole profile").unwrap()];
    assert!(top.contains("Both members are grid-bound."), "{top}");
    let detail = &text[text.find("Sets in detail").unwrap()..];
    assert!(detail.contains("- Both members are grid-bound.") && detail.contains("Faster of the 2 timed members"), "{detail}");
    // cuBLAS's split-K and plain kernels share their first 30 characters: both names stay whole.
    let rows: Vec<&str> = detail.lines().filter(|l| l.starts_with("    #")).collect();
    for name in ["nvjet_tst_64x8_64x16_4x1_v_bz_TNT ", "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT "] {
        assert!(rows.iter().any(|r| r.contains(name)), "{name:?} in {rows:#?}");
    }
}

#[test]
fn a_regime_that_cannot_be_told_says_what_the_profile_lacks() {
    let text = text_of("corpus-sets/rtx5060ti-transpose-blocksize");
    let said = "No member's regime can be told: the profile has no speed of light (SM and memory throughput) metrics \
                (collect them with --section SpeedOfLight).";
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(flat.matches(said).count(), 2, "in the summary and the details: {text}");
    assert!(!flat.contains("is unknown") && !flat.contains("members are unknown"), "{text}");
    assert!(flat.contains("Its regime cannot be told") && flat.contains("no unit's throughput measured"), "{text}");
}

/// A set whose members all take the same time within noise names no fastest: cuBLAS's CUTLASS
/// reference kernel, run unchanged beside each GEMM version, differs by 0.38% over four reports.
#[test]
fn members_within_noise_of_each_other_have_no_fastest() {
    let found = sets_in("corpus-sets/rtx3080-gemm-versions");
    let reference = found.iter().find(|s| s.name == "cutlass::Kernel").expect("the library reference set");
    let spread = sets::findings::same_time_spread_pct(&reference.members, false).expect("within noise");
    assert!(spread < 1.0, "{spread}");
    assert!(reference.summary.contains("All take the same time within noise (1%)"), "{}", reference.summary);
    assert!(!reference.summary.contains("Fastest"), "{}", reference.summary);
    let first = &reference.findings[0].text;
    assert!(first.contains("take the same time within noise") && first.contains("so none is faster"), "{first}");
    // The hand-written GEMM's versions differ by 2.8x: it keeps its fastest.
    let gemm = found.iter().find(|s| s.name == "gemm").expect("the gemm set");
    assert!(sets::findings::same_time_spread_pct(&gemm.members, false).is_none());
    assert!(gemm.summary.contains("Fastest: v7_alter"), "{}", gemm.summary);
}
