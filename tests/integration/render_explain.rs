//! The explain report's renderers on reports built from real corpus profiles: JSON validates
//! against `docs/schema/explain-v2.schema.json`, every format renders, the HTML page is
//! self-contained, escapes kernel names and draws a roofline when the profile has peaks.
//!
//! Set `KEET_RENDER_SAMPLE_DIR` to also write the rendered reports there (to look at them).

use keet::analysis::{analyse_launch, FileError};
use keet::explain::report::{
    Citation, CodeEdit, CodeOrigin, CodeSection, DroppedFinding, EditCheck, ExplainReport, Finding, KernelCodeRef, KernelExplanation,
    KernelGroup, LineCounter, ModelInfo, Origin, ProseCounts, RefusedEdit, ReplacedSentence, ShownFinding, SourceLine, TextOrigin, Writer,
    EXPLAIN_SCHEMA,
};
use keet::render::explain::render_explain;
use keet::render::Format;
use std::path::{Path, PathBuf};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

fn schema() -> jsonschema::Validator {
    let s: serde_json::Value = serde_json::from_str(include_str!("../../docs/schema/explain-v2.schema.json")).expect("schema is JSON");
    jsonschema::validator_for(&s).expect("schema compiles")
}

/// The profile view over every launch of the profile (each launch its own kernel).
fn profile_view_of(analyses: &[keet::analysis::LaunchAnalysis]) -> keet::rules::profile_view::ProfileView {
    let kernels: Vec<_> = analyses
        .iter()
        .map(|a| keet::rules::profile_view::KernelTime {
            name: a.name.clone(),
            block_size: a.block_size,
            grid_size: a.grid_size,
            family: a.diagnosis.kernel.family,
            launches: 1,
            total_ns: a.duration_ns.unwrap_or(0.0),
            gain_ns: a.findings.first().and_then(|f| f.estimated_speedup_pct).map(|p| p / 100.0 * a.duration_ns.unwrap_or(0.0)),
            primary: a.findings.first().map(|f| f.category.as_str().to_string()),
        })
        .collect();
    keet::rules::profile_view::profile_view(&kernels)
}

/// The code section of kernel `rank`: a checked edit on the first, the code not found on the
/// second, a refused edit on the others.
fn code_section(rank: usize) -> CodeSection {
    let kernel = KernelCodeRef {
        path: "src/tiles.cu".into(),
        name: "setColReadCol".into(),
        start_line: 17,
        end_line: 26,
        origin: CodeOrigin::Embedded,
        note: None,
    };
    match rank {
        0 => CodeSection {
            kernel: Some(kernel),
            edit: Some(CodeEdit {
                category: keet::rules::Category::SharedBankConflicts,
                construct: "tile".into(),
                explanation: "A warp writes one column of tile, so its 32 threads meet in one bank <b>.".into(),
                path: "src/tiles.cu".into(),
                start_line: 19,
                before: vec!["    __shared__ int tile[BDIMX][BDIMY];".into()],
                after: vec!["    __shared__ int tile[BDIMX][BDIMY + 1];".into()],
                kinds: vec!["shared-declaration".into()],
                unified_diff: "--- a/src/tiles.cu\n+++ b/src/tiles.cu\n@@ -18,3 +18,3 @@\n {\n-    __shared__ int tile[BDIMX][BDIMY];\n+    __shared__ int tile[BDIMX][BDIMY + 1];\n     unsigned int idx = threadIdx.x;\n".into(),
                checks: vec![EditCheck { name: "parses".into(), passed: true }],
                repaired: true,
            }),
            ..Default::default()
        },
        1 => CodeSection { missing: Some("not found: the report embeds no source (profile with `ncu --import-source yes`)".into()), ..Default::default() },
        _ => CodeSection {
            kernel: Some(kernel),
            no_edit: Some("the model's edit was refused once".into()),
            refused: vec![RefusedEdit {
                before: vec!["int i = 0;".into()],
                after: vec!["int i = 1;".into()],
                reasons: vec!["the edit changes code that fits none of keet's edit kinds".into()],
            }],
            ..Default::default()
        },
    }
}

/// A report over the `top` longest launches of one corpus profile (each launch its own kernel),
/// with a rules finding and a model finding per kernel, and a dropped model finding on the first.
fn report_from(rel: &str, top: usize) -> ExplainReport {
    let path = corpus(rel);
    let profile = keet::profile::read_path(&path).expect("corpus profile reads");
    let analyses: Vec<_> = profile.launches.iter().map(analyse_launch).collect();
    let total: f64 = analyses.iter().filter_map(|a| a.duration_ns).sum();
    let mut order: Vec<usize> = (0..analyses.len()).collect();
    order.sort_by(|&a, &b| analyses[b].duration_ns.unwrap_or(0.0).total_cmp(&analyses[a].duration_ns.unwrap_or(0.0)));
    let mut kernels = Vec::new();
    for (rank, &i) in order.iter().take(top).enumerate() {
        let a = analyses[i].clone();
        let dur = a.duration_ns.unwrap_or(0.0);
        let mut findings = Vec::new();
        // The model's finding cites a real raw metric of the launch.
        let cite = a.facts.duration_ns.as_ref().expect("corpus launch has a duration").evidence[0].clone();
        findings.push(ShownFinding {
            origin: if rank == 1 { Origin::LlmRepaired } else { Origin::Llm },
            // The second suggestion is the expert's (the model's failed the prose gate).
            text_origin: Some(TextOrigin {
                claim: Writer::Model,
                explanation: Writer::Model,
                suggestions: vec![Writer::Model, Writer::Expert],
                kinds: vec![keet::explain::report::KindOfSentence {
                    field: "explanation".into(),
                    text: "Each block runs on one SM, so most SMs sit idle.".into(),
                    kind: keet::mechanism::SentenceKind::Links,
                    writer: Writer::Model,
                }],
            }),
            finding: Finding {
                category: keet::rules::Category::LatencyBound,
                severity: keet::rules::Severity::Medium,
                claim: format!("The kernel runs for {} ns, too short to hide launch latency.", keet::rules::fmt_num(cite.value)),
                evidence: vec![Citation { metric: cite.metric.clone(), value: cite.value, unit: cite.unit.clone() }],
                explanation:
                    "Short kernels spend a large share of their time ramping up and draining; fusing them with neighbours amortises that."
                        .into(),
                suggestions: vec!["Fuse this kernel with its producer or consumer.".into(), "Capture the sequence in a CUDA graph.".into()],
            },
            estimated_speedup_pct: None,
            source_lines: if rank == 0 {
                vec![SourceLine {
                    file: Some("kernel.cu".into()),
                    line: Some(42),
                    text: "out[i] = a[i * stride] + b[i];".into(),
                    counter: "Warp Stall Sampling (All Samples)".into(),
                    share_pct: 37.5,
                    counters: vec![
                        LineCounter { counter: "Warp Stall Sampling (All Samples)".into(), value: 300.0, share_pct: 37.5 },
                        LineCounter { counter: "L2 Theoretical Sectors Global Excessive".into(), value: 4096.0, share_pct: 99.9 },
                    ],
                }]
            } else {
                vec![]
            },
        });
        // The rule layer's first finding, citing the facts it rests on.
        if let Some(r) = a.findings.first() {
            findings.push(ShownFinding {
                origin: Origin::Rules,
                text_origin: None,
                finding: Finding {
                    category: r.category,
                    severity: r.severity,
                    claim: r.claim.clone(),
                    evidence: r
                        .facts
                        .iter()
                        .filter_map(|k| a.facts.get(*k))
                        .map(|f| Citation { metric: f.key.to_string(), value: f.value, unit: f.unit.to_string() })
                        .collect(),
                    explanation: String::new(),
                    suggestions: vec![r.suggestion.clone()],
                },
                estimated_speedup_pct: r.estimated_speedup_pct,
                source_lines: vec![],
            });
        }
        let dropped = if rank == 0 {
            vec![DroppedFinding {
                finding: Finding {
                    category: keet::rules::Category::Fp64,
                    severity: keet::rules::Severity::High,
                    claim: "FP64 throughput dominates.".into(),
                    evidence: vec![Citation { metric: "sm__made_up_metric".into(), value: 99.0, unit: "%".into() }],
                    explanation: String::new(),
                    suggestions: vec![],
                },
                reasons: vec!["cites sm__made_up_metric, which the launch does not have".into()],
            }]
        } else {
            vec![]
        };
        let verdict = findings.last().map(|f| format!("{}: {}", f.finding.category.as_str(), f.finding.claim)).unwrap_or_default();
        let gain = a.findings.first().and_then(|f| f.estimated_speedup_pct).map(|p| dur * p / 100.0);
        kernels.push(KernelExplanation {
            rank: rank + 1,
            kernel: KernelGroup {
                name: a.name.clone(),
                files: vec![path.clone()],
                launch_ids: vec![a.id],
                launches: 1,
                total_duration_ns: dur,
                time_share_pct: if total > 0.0 { 100.0 * dur / total } else { 0.0 },
            },
            analysis: a,
            findings,
            dropped,
            prose: ProseCounts { shown: 3, reasked: 1, replaced: 1 },
            replaced: vec![ReplacedSentence {
                category: keet::rules::Category::LatencyBound,
                field: "suggestion 2".into(),
                texts: vec!["This affects our team.".into(), "Lets talk about the kernel.".into()],
                reasons: vec!["it talks about keet or its readers (\"our team\") instead of the kernel".into()],
            }],
            code: Some(code_section(rank)),
            verdict,
            estimated_gain_ns: gain,
            cached: rank == 2,
            cache_id: (rank == 2).then_some(7),
        });
    }
    ExplainReport {
        schema: EXPLAIN_SCHEMA.into(),
        keet_version: env!("CARGO_PKG_VERSION").into(),
        model: Some(ModelInfo {
            name: "qwen2.5-coder-1.5b-instruct-q4_k_m".into(),
            path: "/models/qwen.gguf".into(),
            sha256: "ab".repeat(32),
            device: "cpu".into(),
        }),
        inputs: vec![path],
        total_duration_ns: total,
        kernels,
        skipped_kernels: analyses.len().saturating_sub(top),
        prose_mode: Some("guided".into()),
        prose: ProseCounts { shown: 3 * top, reasked: top, replaced: top },
        summary: None,
        errors: vec![FileError {
            path: corpus("h200-moe/long_prefill_prof_lines_only.csv"),
            message: "no kernel launches <found> & nothing read".into(),
        }],
        profile: profile_view_of(&analyses),
        settings: None,
        batch: None,
        sets: vec![],
    }
}

fn save(name: &str, s: &str) {
    if let Some(dir) = std::env::var_os("KEET_RENDER_SAMPLE_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(Path::new(&dir).join(name), s).unwrap();
    }
}

fn assert_valid(doc: &serde_json::Value) {
    let v = schema();
    let errors: Vec<String> = v.iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).take(10).collect();
    assert!(errors.is_empty(), "schema errors: {errors:#?}");
}

#[test]
fn json_validates_against_the_schema() {
    for (rel, top) in
        [("h200-moe/sglang_short_decode_raw.csv", 5), ("rtx4090-lashi/reduceInteger.csv", 3), ("h200-moe/decode_c1.ncu-rep", 4)]
    {
        let report = report_from(rel, top);
        let out = render_explain(&report, Format::Json).unwrap();
        assert!(out.ends_with('\n'));
        let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON output parses");
        assert_valid(&doc);
        assert_eq!(doc["schema"], "keet.explain/2");
        assert_eq!(doc["kernels"].as_array().unwrap().len(), top);
        let f = &doc["kernels"][0]["findings"][0];
        assert_eq!(f["origin"], "llm");
        assert!(f["evidence"][0]["metric"].as_str().unwrap().starts_with("gpu__time_duration"));
        assert_eq!(doc["kernels"][1]["findings"][0]["origin"], "llm-repaired");
    }
    // No model, no kernels, no errors: still valid.
    let mut empty = report_from("rtx4090-lashi/reduceInteger.csv", 0);
    empty.model = None;
    empty.errors.clear();
    let doc: serde_json::Value = serde_json::from_str(&render_explain(&empty, Format::Json).unwrap()).unwrap();
    assert_valid(&doc);
}

#[test]
fn schema_rejects_a_wrong_document() {
    let report = report_from("rtx4090-lashi/reduceInteger.csv", 1);
    let mut doc = serde_json::to_value(&report).unwrap();
    doc["kernels"][0]["findings"][0]["origin"] = "guess".into();
    assert!(!schema().is_valid(&doc));
    let mut doc = serde_json::to_value(&report).unwrap();
    doc["schema"] = "keet.explain/3".into();
    assert!(!schema().is_valid(&doc));
}

#[test]
fn text_report() {
    let report = report_from("h200-moe/sglang_short_decode_raw.csv", 5);
    let s = render_explain(&report, Format::Text).unwrap();
    save("sglang.txt", &s);
    assert!(!s.contains('\x1b'), "no ANSI escapes");
    assert!(s.starts_with("keet explain: 5 kernels explained"), "{s}");
    assert!(s.contains("#1  ") && s.contains("#5  "), "{s}");
    assert!(s.contains(&report.kernels[0].kernel.name));
    assert!(s.contains("[model]") && s.contains("[model, repaired]") && s.contains("[rules]"), "{s}");
    let cite = &report.kernels[0].findings[0].finding.evidence[0];
    assert!(s.contains(&format!("{} = {} {}", cite.metric, keet::rules::fmt_num(cite.value), cite.unit)), "{s}");
    assert!(s.contains("1 model finding dropped:") && s.contains("sm__made_up_metric"), "{s}");
    // Model sentences are marked one by one, with the counts per kernel and in total.
    assert!(s.contains("too short to hide launch latency. [model]") && s.contains("Capture the sequence in a CUDA graph."), "{s}");
    assert!(!s.contains("Capture the sequence in a CUDA graph. [model]"), "an expert sentence marked as the model's: {s}");
    assert!(s.contains("model sentences: 3 shown, 1 re-asked, 1 replaced by expert text"), "{s}");
    assert!(s.contains("Model sentences (guided): 15 shown, 5 re-asked, 5 replaced"), "{s}");
    assert!(s.contains("This affects our team."), "replaced text shown (verbose report): {s}");
    // Without --verbose the dropped and replaced model text is gone, the counts stay.
    let mut quiet = report.clone();
    quiet.hide_dropped_text();
    let q = render_explain(&quiet, Format::Text).unwrap();
    assert!(!q.contains("This affects our team.") && !q.contains("FP64 throughput dominates."), "{q}");
    assert!(q.contains("1 model finding dropped (--verbose shows them)") && q.contains("1 re-asked, 1 replaced"), "{q}");
    for f in [Format::Md, Format::Html, Format::Json] {
        let o = render_explain(&quiet, f).unwrap();
        assert!(!o.contains("This affects our team.") && !o.contains("FP64 throughput dominates."), "{f:?}: {o}");
    }
    assert!(s.contains("kernel.cu:42") && s.contains("37.5% of Warp Stall Sampling"), "{s}");
    // The line's own counts beside the ranking one (issue 37), once each.
    assert!(s.contains("the line also has 99.9% of L2 Theoretical Sectors Global Excessive\n"), "{s}");
    assert_eq!(s.matches("of Warp Stall Sampling (All Samples)").count(), s.matches("kernel.cu:42").count(), "{s}");
    assert!(s.contains("Summary (ranked by time"), "{s}");
    assert!(s.contains("25 more kernels not explained"), "{s}");
    assert!(s.contains("error: ") && s.contains("long_prefill_prof_lines_only.csv"), "{s}");
    assert!(s.contains("(cached)"));
    // Kernels in rank order.
    let p1 = s.find("\n#1  ").unwrap();
    let p2 = s.find("\n#2  ").unwrap();
    assert!(p1 < p2);
}

#[test]
fn markdown_report() {
    let report = report_from("h200-moe/sglang_short_decode_raw.csv", 3);
    let s = render_explain(&report, Format::Md).unwrap();
    save("sglang.md", &s);
    assert!(s.starts_with("# keet explain\n"), "{s}");
    assert!(s.contains("## Summary") && s.contains("| # | kernel |"), "{s}");
    assert!(s.contains("## 1. `") && s.contains("## 3. `"), "{s}");
    assert!(s.contains("[model]") && s.contains("[rules]"));
    assert!(
        s.contains("too short to hide launch latency. *(model)*") && s.contains("Model sentences: 3 shown, 1 re-asked, 1 replaced"),
        "{s}"
    );
    assert!(s.contains("<details><summary>Facts ("));
    assert!(s.contains("37.5% of Warp Stall Sampling (All Samples); 99.9% of L2 Theoretical Sectors Global Excessive |"), "{s}");
    // Table rows never break: every table line starts and ends with a pipe.
    for line in s.lines().filter(|l| l.starts_with('|')) {
        assert!(line.ends_with('|'), "broken table row: {line}");
    }
}

fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("http://") && !lower.contains("https://"), "the page refers to a URL");
    assert!(!lower.contains("<script") && !lower.contains("<link") && !lower.contains("@import") && !lower.contains("url("));
    // Inside every tag, `src=` / `href=` may only point at an anchor of the page.
    for tag in lower.split('<').skip(1).map(|t| t.split('>').next().unwrap_or("")) {
        for attr in [" src=", " href="] {
            for (i, _) in tag.match_indices(attr) {
                assert!(tag[i + attr.len()..].starts_with("\"#"), "{attr} not to an anchor in the page: <{tag}>");
            }
        }
    }
}

#[test]
fn html_is_self_contained_with_a_roofline() {
    let report = report_from("h200-moe/sglang_short_decode_raw.csv", 8);
    let s = render_explain(&report, Format::Html).unwrap();
    save("sglang.html", &s);
    assert!(s.starts_with("<!DOCTYPE html>"));
    assert!(s.trim_end().ends_with("</html>"));
    assert_self_contained(&s);
    assert!(s.contains("<svg class=\"roofline\""), "no roofline chart");
    assert!(s.contains("latency. <span class=\"by-model\""), "model sentences are marked");
    assert!(s.contains("<polyline") && s.matches("<circle").count() >= 1, "roofs and dots");
    assert!(s.contains("Kernels by time") && s.contains("class=\"bar\" style=\"width: "));
    assert!(s.contains("<details class=\"facts\">") && s.contains("gpu__time_duration.sum"), "facts with provenance");
    // Templated C++ names are escaped (this profile's names have `<`, `>` and `&`).
    let name = &report.kernels.iter().find(|k| k.kernel.name.contains('<')).expect("a templated name").kernel.name;
    assert!(!s.contains(name.as_str()));
    assert!(s.contains("no kernel launches &lt;found&gt; &amp; nothing read"));
}

#[test]
fn html_escapes_hostile_names_everywhere() {
    let mut report = report_from("h200-moe/sglang_short_decode_raw.csv", 2);
    let evil = "k<script>alert(1)</script>&\"x'<b>";
    report.kernels[0].kernel.name = evil.into();
    report.kernels[0].analysis.device_name = Some("GPU <i>".into());
    report.kernels[0].findings[0].finding.claim = "claim </p><img src=x>".into();
    report.kernels[0].verdict = "<b>bold</b> & co".into();
    for fmt in [Format::Html, Format::Text, Format::Md, Format::Json] {
        render_explain(&report, fmt).unwrap();
    }
    let s = render_explain(&report, Format::Html).unwrap();
    assert!(!s.contains("<script") && !s.contains("<img") && !s.contains("<b>bold") && !s.contains("GPU <i>"), "unescaped markup");
    assert!(s.contains("k&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&amp;&quot;x&#x27;&lt;b&gt;") || s.contains("k&lt;script&gt;"), "{s}");
    assert_self_contained(&s);
}

#[test]
fn html_without_peaks_says_so() {
    let report = report_from("rtx4090-lashi/reduceInteger.csv", 4);
    let s = render_explain(&report, Format::Html).unwrap();
    save("reduceInteger.html", &s);
    assert_self_contained(&s);
    assert!(!s.contains("<svg"), "no chart without peaks");
    assert!(s.contains("No roofline"));
    for fmt in [Format::Text, Format::Md] {
        let t = render_explain(&report, fmt).unwrap();
        assert!(t.contains("reduceNeighbored") || t.contains("reduce"), "{t}");
    }
}

#[test]
fn empty_report_renders() {
    let mut report = report_from("rtx4090-lashi/reduceInteger.csv", 0);
    report.model = None;
    for fmt in [Format::Text, Format::Md, Format::Html, Format::Json] {
        let s = render_explain(&report, fmt).unwrap();
        assert!(!s.is_empty());
    }
    let t = render_explain(&report, Format::Text).unwrap();
    assert!(t.contains("No kernels explained") && t.contains("model: none"), "{t}");
}

#[test]
fn roofline_has_one_roof_per_device() {
    let mut report = report_from("h200-moe/sglang_short_decode_raw.csv", 4);
    let other = report_from("rtx3080ti-sassscope/probe_ffma_raw.csv", 3);
    let devices: std::collections::BTreeSet<_> =
        report.kernels.iter().chain(&other.kernels).filter_map(|k| k.analysis.device_name.clone()).collect();
    assert_eq!(devices.len(), 2, "{devices:?}");
    for mut k in other.kernels {
        k.rank += 4;
        report.kernels.push(k);
    }
    report.inputs.extend(other.inputs);
    let s = render_explain(&report, Format::Html).unwrap();
    save("two-gpus.html", &s);
    assert_self_contained(&s);
    assert_eq!(s.matches("<polyline").count(), 2, "one roof per device");
    for d in &devices {
        assert!(s.contains(&format!("{}: DRAM ", d.replace('<', "&lt;"))), "legend for {d}");
    }
    let doc: serde_json::Value = serde_json::from_str(&render_explain(&report, Format::Json).unwrap()).unwrap();
    assert_valid(&doc);
}

#[test]
fn the_code_edit_renders_as_a_diff_in_every_format() {
    let report = report_from("rtx4090-lashi/smemSquare.ncu-rep", 3);
    let text = render_explain(&report, Format::Text).expect("text");
    assert!(text.contains("code: src/tiles.cu:17-26, setColReadCol (embedded in the report)"), "{text}");
    assert!(text.contains("edit for shared-bank-conflicts (shared-declaration; checked, after a re-ask) [model]:"), "{text}");
    assert!(text.contains("       -    __shared__ int tile[BDIMX][BDIMY];\n       +    __shared__ int tile[BDIMX][BDIMY + 1];"), "{text}");
    assert!(text.contains("code: not found: the report embeds no source"), "{text}");
    assert!(text.contains("refused edit: int i = 0; -> int i = 1;: the edit changes code"), "{text}");
    let md = render_explain(&report, Format::Md).expect("md");
    assert!(md.contains("```diff\n--- a/src/tiles.cu\n+++ b/src/tiles.cu\n"), "{md}");
    assert!(md.contains("+    __shared__ int tile[BDIMX][BDIMY + 1];\n"), "{md}");
    let html = render_explain(&report, Format::Html).expect("html");
    assert!(html.contains(r#"<span class="add">+    __shared__ int tile[BDIMX][BDIMY + 1];</span>"#), "{html}");
    assert!(html.contains(r#"<span class="del">-    __shared__ int tile[BDIMX][BDIMY];</span>"#), "{html}");
    assert!(html.contains("one bank &lt;b&gt;."), "the model's text is escaped: {html}");
    let json: serde_json::Value = serde_json::from_str(&render_explain(&report, Format::Json).expect("json")).expect("json parses");
    let edit = &json["kernels"][0]["code"]["edit"];
    assert_eq!(edit["after"][0], "    __shared__ int tile[BDIMX][BDIMY + 1];");
    assert_eq!(edit["kinds"][0], "shared-declaration");
    assert!(schema().iter_errors(&json).next().is_none(), "the report with code sections validates against the schema");
}

#[test]
fn a_hot_line_without_its_source_text_leaves_no_empty_code_or_trailing_space() {
    // A report with per-line counters but no embedded source (no `--import-source yes`).
    let mut report = report_from("h200-moe/sglang_short_decode_raw.csv", 1);
    let line = &mut report.kernels[0].findings[0].source_lines[0];
    line.text.clear();
    for format in [Format::Text, Format::Md, Format::Context] {
        let s = render_explain(&report, format).unwrap();
        let hot = s.lines().find(|l| l.contains("kernel.cu:42")).unwrap_or_else(|| panic!("{format:?}: the hot line is shown\n{s}"));
        assert!(!hot.contains("``"), "{format:?}: no empty code span: {hot:?}");
        assert_eq!(hot, hot.trim_end(), "{format:?}: no trailing space: {hot:?}");
        assert!(hot.contains("37.5% of Warp Stall Sampling"), "{format:?}: {hot:?}");
    }
}
