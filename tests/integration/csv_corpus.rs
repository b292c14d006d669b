//! The CSV readers against every real CSV export in `../shared/corpus` (see its MANIFEST.tsv).
//!
//! Expected values were read from the files independently of this crate, with Python's `csv`
//! module in a shell (rows whose first character is `"`, i.e. without the `==PROF==` and
//! application-output lines; launches grouped by the `ID` column in order of first appearance;
//! durations = the `Duration` / `gpu__time_duration.sum` cell with thousands separators removed,
//! times 1 for ns/nsecond, 1e3 for us/usecond). They are hard-coded here so a reader regression
//! cannot hide behind a shared bug.

use approx::relative_eq;
use keet::profile::{self, MetricValue, Profile, ProfileError, SourceKind};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus"))
}

fn load(rel: &str) -> Profile {
    let p = corpus().join(rel);
    profile::read_path(&p).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn durations(p: &Profile) -> Vec<f64> {
    p.launches.iter().map(|l| l.metrics.get("gpu__time_duration.sum").and_then(|m| m.as_f64()).unwrap_or(f64::NAN)).collect()
}

fn ids(p: &Profile) -> Vec<u64> {
    p.launches.iter().map(|l| l.id).collect()
}

fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "got {got:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(relative_eq!(*g, *w, max_relative = 1e-12), "got {got:?}\nwant {want:?}");
    }
}

#[test]
fn every_corpus_csv_is_handled() {
    let manifest = std::fs::read_to_string(corpus().join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    let mut n = 0;
    for line in manifest.lines().skip(1) {
        let file = line.split('\t').next().unwrap();
        if !file.ends_with(".csv") {
            continue;
        }
        n += 1;
        let r = profile::read_path(&corpus().join(file));
        if file == "h200-moe/long_prefill_prof_lines_only.csv" {
            match r {
                Err(ProfileError::Empty { path, message }) => {
                    assert!(path.ends_with(file));
                    assert!(message.contains("only ==PROF== lines (3 line(s)), no CSV header"), "{message}");
                }
                other => panic!("{file}: expected an Empty error, got {other:?}"),
            }
            continue;
        }
        let p = r.unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!p.launches.is_empty(), "{file}");
        for l in &p.launches {
            assert!(!l.name.is_empty(), "{file}: launch {} has no name", l.id);
            assert!(!l.metrics.is_empty() || l.source.is_some(), "{file}: launch {} is empty", l.id);
        }
    }
    assert!(n >= 15, "expected the 15 corpus CSVs, found {n}");
}

#[test]
fn details_rtx3060() {
    let p = load("rtx3060-sassscope/details.csv");
    assert_eq!(p.kind, SourceKind::DetailsCsv);
    assert_eq!(ids(&p), vec![0]);
    let l = &p.launches[0];
    assert_eq!(l.name, "probe_timer_only");
    assert_eq!((l.process_id, l.process_name.as_deref()), (Some(21308), Some("probe_ffma.exe")));
    assert_eq!((l.block_size, l.grid_size, l.compute_capability.as_deref()), (Some([1, 1, 1]), Some([1, 1, 1]), Some("8.6")));
    // "Duration","ns","1,952"
    assert_close(&durations(&p), &[1952.0]);
    // "DRAM Frequency","hz","7,256,830,601.09"
    assert_eq!(l.metrics.get("dram__cycles_elapsed.avg.per_second").unwrap().as_f64(), Some(7_256_830_601.09));
    // 6 rule rows: SOLBottleneck, 2x LaunchConfiguration, AchievedOccupancy, TheoreticalOccupancy, PCSamplingData.
    let rules: Vec<&str> = l.ncu_rules.iter().map(|r| r.rule.as_str()).collect();
    assert_eq!(
        rules,
        ["SOLBottleneck", "LaunchConfiguration", "LaunchConfiguration", "AchievedOccupancy", "TheoreticalOccupancy", "PCSamplingData"]
    );
    assert_eq!(l.ncu_rules[4].speedup_pct, Some(66.67));
    assert_eq!(l.ncu_rules[5].kind, profile::NcuRuleType::Wrn);
    assert!(p.notes.is_empty(), "{:?}", p.notes);
}

/// Numeric value of a details metric for comparison: text like "5,151 (33; 33; ...)" (a chart
/// series) compares by its leading aggregate.
fn comparable(m: profile::Metric<'_>) -> Option<f64> {
    match &m.value {
        MetricValue::Number(v) => Some(*v),
        MetricValue::Text(t) => {
            let lead = t.split(" (").next()?;
            keet::profile::units::parse_number(lead, Default::default()).ok().flatten()
        }
    }
}

/// details.csv and raw.csv of the same launch agree for every details row that maps to a raw name.
#[test]
fn details_agree_with_raw_rtx3060() {
    let d = load("rtx3060-sassscope/details.csv");
    let r = load("rtx3060-sassscope/raw.csv");
    assert_eq!(r.kind, SourceKind::RawCsv);
    let (dl, rl) = (&d.launches[0], &r.launches[0]);
    let mut compared = 0;
    let mut unmapped = Vec::new();
    for (key, m) in &dl.metrics {
        if key.contains('/') {
            unmapped.push(key.to_string());
            continue;
        }
        let raw = rl.metrics.get(key).unwrap_or_else(|| panic!("{key} (from {:?}) is not on the raw page", m.label));
        match (comparable(m), comparable(raw)) {
            (Some(a), Some(b)) => {
                // The details page rounds to the digits it shows: allow half a unit of the last
                // shown digit, scaled like the value.
                let shown = m.raw_value.split(" (").next().unwrap_or("");
                let decimals = shown.rsplit_once('.').map_or(0, |(_, f)| f.len()) as i32;
                let factor = keet::profile::units::normalize_unit(m.raw_unit).0;
                let eps = 0.5 * 10f64.powi(-decimals) * factor + 1e-9;
                assert!(
                    relative_eq!(a, b, epsilon = eps, max_relative = 1e-9),
                    "{key} ({:?}): details {} {} vs raw {} {}",
                    m.label,
                    m.raw_value,
                    m.raw_unit,
                    raw.raw_value,
                    raw.raw_unit
                );
            }
            _ => assert_eq!(m.raw_value, raw.raw_value, "{key}"),
        }
        compared += 1;
    }
    // 178 distinct metrics on the details page of this launch: 170 map to raw names and agree; the
    // other 8 are Source Counters labels (the L2 eviction-policy table and one derivative) that no
    // section file maps to a single raw metric.
    assert!(compared >= 170, "only {compared} mapped: unmapped {unmapped:?}");
    assert!(unmapped.len() <= 8, "unmapped: {unmapped:?}");
    eprintln!("details vs raw: {compared} metrics compared, unmapped: {unmapped:?}");
}

#[test]
fn details_h200() {
    let p = load("h200-moe/decode_c1_details.csv");
    assert_eq!(p.launches.len(), 20);
    assert_eq!(ids(&p), (0..20).collect::<Vec<_>>());
    assert_close(
        &durations(&p),
        &[
            4060.0, 11260.0, 4610.0, 7840.0, 3780.0, 19970.0, 3390.0, 13340.0, 3940.0, 11100.0, 4800.0, 7740.0, 3650.0, 19650.0, 3780.0,
            12420.0, 4000.0, 7940.0, 3580.0, 3650.0,
        ],
    );
    // Repeated kernel names stay separate launches.
    assert_eq!(p.launches[1].name, "nvjet_tst_64x8_64x16_4x1_v_bz_TNT");
    assert_eq!(p.launches[3].name, "nvjet_tst_64x8_64x16_4x1_v_bz_TNT");
    assert!(p.launches[0].name.starts_with("void norm::RMSNormKernel<8, __nv_bfloat16>(T2 *, T2 *, T2 *,"));
    // 62 rule rows (non-empty "Rule Name") over 20 launches.
    assert_eq!(p.launches.iter().map(|l| l.ncu_rules.len()).sum::<usize>(), 62);
    // "Dynamic Shared Memory Per Block" is byte/block in some rows, Kbyte/block in others.
    let units: std::collections::BTreeSet<&str> =
        p.launches.iter().filter_map(|l| l.metrics.get("launch__shared_mem_per_block_dynamic")).map(|m| m.raw_unit).collect();
    assert_eq!(units.into_iter().collect::<Vec<_>>(), ["Kbyte/block", "byte/block"]);
    for l in &p.launches {
        let m = &l.metrics.get("launch__shared_mem_per_block_dynamic").unwrap();
        assert_eq!(m.unit.symbol(), "byte/block");
    }

    let p = load("h200-moe/agent_decode_b32_stalls.csv");
    assert_eq!(p.launches.len(), 24);
    assert_close(
        &durations(&p),
        &[
            3900.0, 11300.0, 5060.0, 8030.0, 3780.0, 20030.0, 3680.0, 12580.0, 3900.0, 12100.0, 5340.0, 8100.0, 3710.0, 19650.0, 3810.0,
            12900.0, 3900.0, 8420.0, 4900.0, 4100.0, 4100.0, 6560.0, 87870.0, 3170.0,
        ],
    );
    assert_eq!(p.launches.iter().map(|l| l.ncu_rules.len()).sum::<usize>(), 146);
    assert!(p.launches[22].name.starts_with("void cutlass::device_kernel<flash::enable_sm90_or_later<flas"));
    // Warp State Statistics rows are mapped to raw names.
    assert!(p.launches[0].metrics.contains_key("smsp__average_warp_latency_per_inst_issued.ratio"));
    assert!(p.launches[0].metrics.contains_key("smsp__issue_inst0.avg.pct_of_peak_sustained_active"));
}

#[test]
fn details_cc75_quoted_commas() {
    let p = load("cc75-nsightful/copy_blocked.csv");
    assert_eq!(p.launches.len(), 1);
    let l = &p.launches[0];
    assert!(l.name.starts_with("copy_blocked[v1,cw51cXTLSUwv1sDUaKthrqNgqqmjgOR3W3CwAkMXLaJtQYkOIgxJU0gCqOkEJoHkbttqdVhoqlspQGNFHSgJ5BnXagIA](Array<long long, 1, C, mutable, aligned>,"));
    assert_close(&durations(&p), &[21_058_944.0]);
    assert_eq!(l.ncu_rules.len(), 11);
    assert_eq!((l.block_size, l.grid_size), (Some([256, 1, 1]), Some([1024, 1, 1])));
    // "Memory Throughput" is % in Speed Of Light and byte/s in Memory Workload Analysis.
    assert!(l.metrics.contains_key("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"));
    assert!(l.metrics.contains_key("dram__bytes.sum.per_second"));
}

#[test]
fn metrics_pages() {
    let p = load("cc86-esmm/metrics.csv");
    assert_eq!(p.kind, SourceKind::MetricsCsv);
    assert_eq!(ids(&p), (0..9).collect::<Vec<_>>());
    // Old unit names (nsecond) and thousands separators.
    assert_close(&durations(&p), &[10776576.0, 1396992.0, 1006400.0, 430592.0, 294816.0, 262784.0, 223904.0, 149344.0, 148896.0]);
    assert_eq!(p.launches[0].name, "basic(int, int, int, const float *, const float *, float *)");
    assert_eq!(p.launches[7].name, "ampere_sgemm_128x64_nn");
    assert_eq!(p.launches[7].grid_size, Some([8, 16, 5]));
    assert_eq!(p.launches[0].metrics.get("dram__bytes.sum").unwrap().as_f64(), Some(32_746_880.0));

    let p = load("rtx4090-lashi/reduceInteger.csv");
    assert_eq!(p.launches.len(), 9);
    assert_close(&durations(&p), &[814048.0, 581056.0, 536736.0, 296576.0, 175520.0, 128512.0, 129696.0, 124704.0, 123744.0]);
    assert_eq!(p.launches[0].name, "reduceNeighbored(int *, int *, unsigned int)");
    assert!(p.notes.iter().any(|n| n.contains("2 ncu message line(s)") && n.contains("1-2")), "{:?}", p.notes);

    let p = load("rtx4090-lashi/readWriteOffset_ca.csv");
    assert_close(&durations(&p), &[203264.0, 213152.0, 227712.0]);
    // Same kernel three times: three launches.
    assert!(p.launches.iter().all(|l| l.name == "readOffset(float *, float *, float *, unsigned long, int)"));
    assert_eq!(
        p.launches[1].metrics.get("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio").unwrap().as_f64(),
        Some(5.0)
    );
}

#[test]
fn metrics_with_application_output() {
    let p = load("h200-moe/cutlass_microbench_mixed_stdout.csv");
    assert_eq!(p.kind, SourceKind::MetricsCsv);
    assert_eq!(ids(&p), vec![0, 1, 2, 3]);
    // sm__throughput.avg.pct_of_peak_sustained_elapsed: 13.14, 12.81, 12.88, 12.79 (%).
    let sm: Vec<f64> =
        p.launches.iter().map(|l| l.metrics.get("sm__throughput.avg.pct_of_peak_sustained_elapsed").unwrap().as_f64().unwrap()).collect();
    assert_close(&sm, &[13.14, 12.81, 12.88, 12.79]);
    assert_eq!(p.launches[0].name.len(), 1462);
    assert!(p.launches[0].name.starts_with("void device_kernel<GemmUniversal<GroupProblemShape<tuple<long, long, long>>,"));
    let notes = p.notes.join("\n");
    assert!(notes.contains("2 ncu message line(s)") && notes.contains("line(s) 1, 4"), "{notes}");
    assert!(notes.contains("2 line(s) that are not part of the CSV table") && notes.contains("line(s) 2-3"), "{notes}");
}

#[test]
fn raw_pages() {
    let p = load("h200-moe/sglang_short_decode_raw.csv");
    assert_eq!(p.kind, SourceKind::RawCsv);
    assert_eq!(ids(&p), (0..30).collect::<Vec<_>>());
    // gpu__time_duration.sum is in usecond on this page.
    assert_close(
        &durations(&p),
        &[
            2464.0, 3296.0, 2112.0, 2144.0, 1984.0, 2272.0, 1920.0, 2144.0, 1952.0, 2656.0, 2016.0, 4512.0, 2880.0, 4096.0, 8608.0, 2816.0,
            3328.0, 3648.0, 12896.0, 8128.0, 3232.0, 3712.0, 5984.0, 4288.0, 3552.0, 2208.0, 17280.0, 2592.0, 10432.0, 3168.0,
        ],
    );
    assert_eq!(p.launches[26].name, "fused_moe_kernel");
    assert_eq!(p.launches[28].name, "fused_moe_kernel");
    // 2232 columns - 11 identity columns = 2221 metrics; 66270 non-empty metric cells in 30 rows.
    assert_eq!(p.launches.iter().map(|l| l.metrics.len()).sum::<usize>(), 66270);
    assert_eq!(p.launches[0].device_name.as_deref(), Some("NVIDIA H200"));

    let p = load("rtx3060-sassscope/raw.csv");
    assert_close(&durations(&p), &[1952.0]);
    assert_eq!(p.launches[0].metrics.len(), 614);

    // Three launches, then a Python traceback (lines 6-16).
    let p = load("rtx3080ti-sassscope/probe_ffma_raw.csv");
    assert_eq!(ids(&p), vec![0, 1, 2]);
    assert_close(&durations(&p), &[4608.0, 984832.0, 347744.0]);
    let names: Vec<&str> = p.launches.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["probe_timer_only", "probe_dependent_ffma", "probe_independent_ffma_8"]);
    assert!(p.notes.iter().any(|n| n.contains("stopped at line 6") && n.contains("11 line(s) not read")), "{:?}", p.notes);
}

#[test]
fn source_pages() {
    let s = load("rtx3060-sassscope/source_sass.csv");
    assert_eq!(s.kind, SourceKind::SourceCsv);
    let v = s.launches[0].source.as_ref().unwrap();
    assert_eq!(s.launches[0].name, "probe_timer_only");
    assert_eq!(v.view, "sass");
    // 34 lines: preamble, header, 32 instructions; 25 header columns, 2 of them Address/Source.
    assert_eq!(v.rows.len(), 32);
    assert_eq!(v.columns.len(), 23);
    assert_eq!(v.rows[0].address.as_deref(), Some("0x700e7d100"));
    assert_eq!(v.rows[0].text.trim(), "IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28]");

    let c = load("rtx3060-sassscope/source_cuda_sass.csv");
    let v = c.launches[0].source.as_ref().unwrap();
    assert_eq!(v.view, "cuda,sass");
    assert_eq!(v.rows.len(), 51);
    let line83 = v.rows.iter().find(|r| r.line == Some(83) && r.address.is_none()).unwrap();
    // ncu writes this line's quotes unescaped; they are kept.
    assert_eq!(line83.text, "extern \"C\" __global__ void probe_timer_only(");
    assert_eq!(line83.file.as_deref(), Some("C:/Users/as042/OneDrive/Desktop/SASSScope/src/probe_kernels.cu"));

    // The later stage attaches a source page to the launch of another export.
    let mut d = load("rtx3060-sassscope/details.csv");
    assert_eq!(profile::csv_pages::attach_source(&mut d, &s), Ok(0));
    assert!(d.launches[0].source.is_some());
}

#[test]
fn gui_export() {
    let p = load("rtx3060-sassscope/ui_raw_export.csv");
    assert_eq!(p.kind, SourceKind::UiExportCsv);
    assert_eq!(ids(&p), vec![0, 1, 2]);
    // "gpu__time_duration.sum [us],4.61,984.83,347.74"
    assert_close(&durations(&p), &[4610.0, 984830.0, 347740.0]);
    let l = &p.launches[1];
    assert_eq!(l.name, "probe_dependent_ffma");
    assert_eq!((l.process_id, l.process_name.as_deref()), (Some(28264), Some("probe_ffma.exe")));
    assert_eq!(l.device_name.as_deref(), Some("NVIDIA GeForce RTX 3080 Ti Laptop GPU"));
    assert_eq!(l.compute_capability.as_deref(), Some("8.6"));
    // "gpc__cycles_elapsed.max [cycle],"2,636","576,056","203,391""
    assert_eq!(l.metrics.get("gpc__cycles_elapsed.max").unwrap().as_f64(), Some(576_056.0));
}

#[test]
fn errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.csv");
    let good = std::fs::read_to_string(corpus().join("rtx4090-lashi/readWriteOffset_ca.csv")).unwrap();
    let mut lines: Vec<&str> = good.lines().collect();
    lines[5] = "\"x\",\"5253\",\"readWriteOffset_ca\"";
    std::fs::write(&path, lines.join("\n")).unwrap();
    let err = profile::read_path(&path).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}:6:", path.display())), "{err}");
    assert!(err.contains("launch ID"), "{err}");

    let err = profile::read_path(&corpus().join("h200-moe/long_prefill_prof_lines_only.csv")).unwrap_err().to_string();
    assert!(err.contains("long_prefill_prof_lines_only.csv") && err.contains("no CSV header"), "{err}");
    assert!(matches!(profile::read_path(Path::new("/nonexistent.csv")), Err(ProfileError::Io { .. })));
}
