//! The `.ncu-rep` reader against the real reports in `../shared/corpus` and their CSV twins.
//!
//! Expected launch counts, names, launch dimensions and durations were read independently: with
//! a separate throw-away protobuf dumper (Python, generic wire-format walk) and from the CSV
//! exports ncu wrote for the same runs (`raw.csv`, `details.csv`, `source_sass.csv`,
//! `decode_c1_details.csv`). Most twin comparisons parse the CSV here with the `csv` crate and
//! simple string handling, so they do not depend on keet's own CSV reader;
//! `csv_reader_twin_agrees` and `details_pages_through_csv_reader_agree` additionally compare
//! with it (both readers must agree metric by metric).
//!
//! Without the corpus (a checkout without `../shared`), the tests print a note and pass.

use approx::relative_eq;
use keet::profile::units::{normalize_unit, parse_number, NumberLocale};
use keet::profile::{self, Launch, MetricValue, NcuRuleType, Profile, SourceKind, Unit};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus");

fn corpus(rel: &str) -> PathBuf {
    Path::new(CORPUS).join(rel)
}

fn corpus_present() -> bool {
    let ok = corpus("MANIFEST.tsv").exists();
    if !ok {
        eprintln!("corpus not found at {CORPUS}; skipping");
    }
    ok
}

fn report(rel: &str) -> Profile {
    let path = corpus(rel);
    let p = profile::read_path(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(p.kind, SourceKind::NcuRep);
    p
}

/// The stored duration; NaN when the report stores NaN (fa2_fwd's FlashAttention launch).
fn duration_ns(l: &Launch) -> f64 {
    let m = &l.metrics.get("gpu__time_duration.sum").unwrap();
    assert_eq!(m.unit, Unit::Nanoseconds);
    match m.value {
        MetricValue::Number(v) => v,
        other => panic!("duration is not a number: {other:?}"),
    }
}

/// (report, [(name, grid, block, gpu__time_duration.sum in ns)]) in launch order.
type Expected = (&'static str, &'static [(&'static str, [u64; 3], [u64; 3], f64)]);

const RMS: &str = "void flashinfer::norm::RMSNormKernel<(unsigned int)8, __nv_bfloat16>(";
const CONV: &str = "void causal_conv1d_update_kernel";
const ACT: &str = "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu<";
const J4: &str = "nvjet_tst_64x8_64x16_4x1_v_bz_TNT";
const J2: &str = "nvjet_tst_64x8_64x16_2x1_v_bz_TNT";
const JK: &str = "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT";

const EXPECTED: &[Expected] = &[
    // Later blocks add names to the string table. The FlashAttention launch stores NaN as its
    // duration and zero launch dimensions (as ncu_report reads it too).
    (
        "h800-sglang/fa2_fwd.ncu-rep",
        &[
            ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel", [1056, 1, 1], [256, 1, 1], 16448.0),
            ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel", [8, 1, 1], [256, 1, 1], 3232.0),
            ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel", [1056, 1, 1], [256, 1, 1], 33504.0),
            ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel", [1056, 1, 1], [256, 1, 1], 33952.0),
            ("void flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128", [0, 0, 0], [0, 0, 0], f64::NAN),
        ],
    ),
    ("rtx3060-sassscope/profile.ncu-rep", &[("probe_timer_only", [1, 1, 1], [1, 1, 1], 1952.0)]),
    (
        "rtx4090-lashi/readWriteOffset_ca.ncu-rep",
        &[
            ("readOffset(float *, float *, float *, unsigned long, int)", [32768, 1, 1], [512, 1, 1], 206080.0),
            ("readOnlyCache(float *, float *, float *, unsigned long, int)", [32768, 1, 1], [512, 1, 1], 219424.0),
        ],
    ),
    (
        "rtx4090-lashi/simpleAOS.ncu-rep",
        &[("testInnerStruct(const innerStruct *, innerStruct *, unsigned int)", [8192, 1, 1], [512, 1, 1], 65504.0)],
    ),
    (
        "rtx4090-lashi/simpleDivergence.ncu-rep",
        &[
            ("warmingUp(float *)", [1, 1, 1], [64, 1, 1], 3104.0),
            ("kernel1(float *)", [1, 1, 1], [64, 1, 1], 3168.0),
            ("kernel2(float *)", [1, 1, 1], [64, 1, 1], 3392.0),
            ("kernel3(float *)", [1, 1, 1], [64, 1, 1], 3264.0),
        ],
    ),
    (
        "rtx4090-lashi/smemSquare.ncu-rep",
        &[
            ("setRowReadRow(int *)", [1, 1, 1], [32, 32, 1], 1728.0),
            ("setRowReadRowUsingCUB(int *)", [1, 1, 1], [32, 32, 1], 1696.0),
            ("setRowReadRowWithInput(int *, int *)", [1, 1, 1], [32, 32, 1], 2016.0),
            ("setRowReadRowWithInputUsingCUB(int *, int *)", [1, 1, 1], [32, 32, 1], 1952.0),
            ("setColReadCol(int *)", [1, 1, 1], [32, 32, 1], 2560.0),
            ("setRowReadCol(int *)", [1, 1, 1], [32, 32, 1], 2112.0),
            ("setRowReadColDyn(int *)", [1, 1, 1], [32, 32, 1], 2112.0),
            ("setRowReadColPad(int *)", [1, 1, 1], [32, 32, 1], 1728.0),
            ("setRowReadColDynPad(int *)", [1, 1, 1], [32, 32, 1], 1760.0),
        ],
    ),
    ("rtx4090-lashi/transpose.ncu-rep", &[("copyRow(const float *, float *, int, int)", [32, 512, 1], [64, 4, 1], 27584.0)]),
    (
        "rtxa2000-sample/addConstDouble.ncu-rep",
        &[("addConstDouble(int, double *, double, double *)", [12288, 1, 1], [256, 1, 1], 239008.0)],
    ),
    (
        "h200-moe/decode_c1.ncu-rep",
        &[
            (RMS, [1, 1, 1], [32, 8, 1], 4064.0),
            (J4, [4, 24, 1], [384, 1, 1], 11264.0),
            (CONV, [1, 32, 1], [64, 1, 1], 4608.0),
            (J4, [4, 8, 1], [384, 1, 1], 7840.0),
            (RMS, [1, 1, 1], [32, 8, 1], 3776.0),
            (J2, [2, 66, 1], [384, 1, 1], 19968.0),
            (ACT, [1, 1, 1], [896, 1, 1], 3392.0),
            (JK, [4, 24, 1], [384, 1, 1], 13344.0),
            (RMS, [1, 1, 1], [32, 8, 1], 3936.0),
            (J4, [4, 24, 1], [384, 1, 1], 11104.0),
            (CONV, [1, 32, 1], [64, 1, 1], 4800.0),
            (J4, [4, 8, 1], [384, 1, 1], 7744.0),
            (RMS, [1, 1, 1], [32, 8, 1], 3648.0),
            (J2, [2, 66, 1], [384, 1, 1], 19648.0),
            (ACT, [1, 1, 1], [896, 1, 1], 3776.0),
            (JK, [4, 24, 1], [384, 1, 1], 12416.0),
            (RMS, [1, 1, 1], [32, 8, 1], 4000.0),
            (J4, [4, 12, 1], [384, 1, 1], 7936.0),
            (RMS, [32, 1, 1], [32, 1, 1], 3584.0),
            (RMS, [8, 1, 1], [32, 1, 1], 3648.0),
        ],
    ),
];

#[test]
fn every_corpus_report_parses_with_the_expected_launches() {
    if !corpus_present() {
        return;
    }
    // Every .ncu-rep in the corpus is listed above.
    let mut on_disk: Vec<String> = profile::expand_inputs(&[PathBuf::from(CORPUS)])
        .unwrap()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "ncu-rep"))
        .map(|p| p.strip_prefix(CORPUS).unwrap().to_string_lossy().trim_start_matches('/').to_string())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = EXPECTED.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);

    for (file, launches) in EXPECTED {
        let p = report(file);
        assert_eq!(p.launches.len(), launches.len(), "{file}: launch count");
        for (i, (l, (name, grid, block, dur))) in p.launches.iter().zip(launches.iter()).enumerate() {
            let ctx = format!("{file} launch {i}");
            assert_eq!(l.id, i as u64, "{ctx}");
            assert!(l.name.starts_with(name), "{ctx}: name {:?} does not start with {name:?}", l.name);
            assert_eq!(l.grid_size, Some(*grid), "{ctx}");
            assert_eq!(l.block_size, Some(*block), "{ctx}");
            let d = duration_ns(l);
            assert!(d == *dur || (d.is_nan() && dur.is_nan()), "{ctx}: duration {d} != {dur}");
            assert!(l.metrics.len() > 200, "{ctx}: only {} metrics", l.metrics.len());
            assert!(l.compute_capability.is_some(), "{ctx}");
            assert!(l.device_name.is_some(), "{ctx}");
            assert!(l.process_id.is_some() && l.process_name.is_some(), "{ctx}");
            assert!(l.context_id.is_some() && l.stream_id.is_some(), "{ctx}");
            assert!(l.mangled_name.is_some(), "{ctx}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CSV twins, parsed by hand.

/// A raw page: header (raw metric names), units row, one row per launch; anything after the data
/// (an appended traceback...) is ignored.
struct RawPage {
    header: Vec<String>,
    units: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn read_raw_page(rel: &str) -> RawPage {
    let text = std::fs::read_to_string(corpus(rel)).unwrap();
    let text = text.trim_start_matches('\u{feff}');
    let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text.as_bytes());
    let mut records = rdr.records().map_while(|r| r.ok()).map(|r| r.iter().map(str::to_string).collect::<Vec<_>>());
    let header = records.by_ref().find(|r| r.first().map(String::as_str) == Some("ID")).expect("header row");
    let units = records.next().expect("units row");
    let rows = records.take_while(|r| r.len() == header.len() && r[0].chars().all(|c| c.is_ascii_digit())).collect();
    RawPage { header, units, rows }
}

/// Value in the CSV's unit -> normalised value, and the allowed difference for a number printed
/// with at most 2 decimals in that unit.
fn csv_number(text: &str, unit: &str) -> Option<(f64, Unit, f64)> {
    let v = parse_number(text, NumberLocale::DotDecimal).ok()??;
    let (factor, unit) = normalize_unit(unit);
    Some((v * factor, unit, 0.005 * factor))
}

fn dims(text: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = text.trim_matches(|c| c == '(' || c == ')').split(',').map(|s| s.trim().parse().ok()).collect::<Option<_>>()?;
    v.try_into().ok()
}

#[test]
fn rtx3060_report_matches_raw_csv_metric_by_metric() {
    if !corpus_present() {
        return;
    }
    let p = report("rtx3060-sassscope/profile.ncu-rep");
    let page = read_raw_page("rtx3060-sassscope/raw.csv");
    assert_eq!(page.rows.len(), p.launches.len());
    let l = &p.launches[0];
    let row: BTreeMap<&str, (&str, &str)> = page
        .header
        .iter()
        .zip(page.units.iter().zip(page.rows[0].iter()))
        .map(|(h, (u, v))| (h.as_str(), (u.as_str(), v.as_str())))
        .collect();

    // Identity columns.
    assert_eq!(row["ID"].1, l.id.to_string());
    assert_eq!(Some(row["Process ID"].1.parse::<u64>().unwrap()), l.process_id);
    assert_eq!(Some(row["Process Name"].1), l.process_name.as_deref());
    assert_eq!(row["Kernel Name"].1, l.name);
    assert_eq!(Some(row["Context"].1.parse::<u64>().unwrap()), l.context_id);
    assert_eq!(Some(row["Stream"].1.parse::<u64>().unwrap()), l.stream_id);
    assert_eq!(dims(row["Block Size"].1), l.block_size);
    assert_eq!(dims(row["Grid Size"].1), l.grid_size);
    assert_eq!(Some(row["Device"].1.parse::<u64>().unwrap()), l.device_id);
    assert_eq!(Some(row["CC"].1), l.compute_capability.as_deref());

    let (mut numbers, mut texts, mut missing, mut unit_known, mut unit_agree) = (0, 0, Vec::new(), 0, 0);
    let mut failures = Vec::new();
    for (name, (unit, text)) in &row {
        if !name.contains("__") {
            continue; // identity columns, checked above
        }
        let Some(m) = l.metrics.get(name) else {
            missing.push(*name);
            continue;
        };
        match &m.value {
            MetricValue::Number(v) => {
                let Some((want, csv_unit, eps)) = csv_number(text, unit) else {
                    failures.push(format!("{name}: report has {v}, CSV has non-number {text:?}"));
                    continue;
                };
                numbers += 1;
                if !relative_eq!(*v, want, epsilon = eps * 1.0001, max_relative = 1e-6) {
                    failures.push(format!("{name}: report {v} vs CSV {text} {unit} (= {want})"));
                }
                if m.unit != Unit::None {
                    unit_known += 1;
                    if m.unit == csv_unit {
                        unit_agree += 1;
                    } else {
                        failures.push(format!("{name}: inferred unit {:?}, CSV unit {unit:?} = {csv_unit:?}", m.unit));
                    }
                }
            }
            MetricValue::Text(t) => {
                texts += 1;
                if t != text {
                    failures.push(format!("{name}: report text {t:?} vs CSV {text:?}"));
                }
            }
        }
    }
    eprintln!(
        "raw.csv: {numbers} numbers and {texts} texts compared, {unit_agree}/{unit_known} inferred units agree, \
         {} CSV columns not in the report: {missing:?}",
        missing.len()
    );
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
    assert!(numbers >= 550, "only {numbers} numeric metrics compared");
    assert!(unit_known >= 250, "only {unit_known} units inferred");
    assert!(missing.len() <= 5, "CSV columns missing from the report: {missing:?}");
}

/// Name-based unit inference (almost) never contradicts the units rows of the corpus raw pages.
#[test]
fn inferred_units_agree_with_raw_csv_units() {
    if !corpus_present() {
        return;
    }
    use keet::profile::ncu_rep::infer::unit_for_metric;
    let (mut known, mut total) = (0, 0);
    let mut wrong = Vec::new();
    for rel in ["rtx3060-sassscope/raw.csv", "rtx3080ti-sassscope/probe_ffma_raw.csv", "h200-moe/sglang_short_decode_raw.csv"] {
        let page = read_raw_page(rel);
        for (name, unit) in page.header.iter().zip(&page.units) {
            if !name.contains("__") {
                continue;
            }
            total += 1;
            let inferred = unit_for_metric(name);
            if inferred == Unit::None {
                continue;
            }
            known += 1;
            let csv = normalize_unit(unit).1;
            if inferred != csv {
                wrong.push(format!("{rel}: {name}: inferred {inferred:?}, CSV {unit:?}"));
            }
        }
    }
    eprintln!("units inferred for {known} of {total} raw-page columns; disagreements:\n{}", wrong.join("\n"));
    // ncu itself is not fully consistent (`gcc__xbar2gcc_sectors.sum` has no unit on H200, while
    // every other `*_sectors.sum` is in sectors): allow a handful of such quirks, no more.
    assert!(wrong.len() * 200 <= known, "{} of {known} inferred units disagree:\n{}", wrong.len(), wrong.join("\n"));
    assert!(known * 2 > total, "only {known} of {total} inferred");
}

/// A details page row: (ID, section, metric label, unit, value, rule name, rule type, message,
/// speedup type, speedup).
struct DetailsRow {
    id: u64,
    kernel: String,
    block: String,
    grid: String,
    section: String,
    metric: String,
    unit: String,
    value: String,
    rule: String,
    rule_type: String,
    message: String,
    speedup_type: String,
    speedup: String,
}

fn read_details(rel: &str) -> Vec<DetailsRow> {
    let mut rdr = csv::ReaderBuilder::new().flexible(true).from_path(corpus(rel)).unwrap();
    let h: Vec<String> = rdr.headers().unwrap().iter().map(str::to_string).collect();
    let col = |name: &str| h.iter().position(|c| c == name);
    let get = |r: &csv::StringRecord, name: &str| col(name).and_then(|i| r.get(i)).unwrap_or("").to_string();
    rdr.records()
        .map(|r| r.unwrap())
        .map(|r| DetailsRow {
            id: get(&r, "ID").parse().unwrap(),
            kernel: get(&r, "Kernel Name"),
            block: get(&r, "Block Size"),
            grid: get(&r, "Grid Size"),
            section: get(&r, "Section Name"),
            metric: get(&r, "Metric Name"),
            unit: get(&r, "Metric Unit"),
            value: get(&r, "Metric Value"),
            rule: get(&r, "Rule Name"),
            rule_type: get(&r, "Rule Type"),
            message: get(&r, "Rule Description"),
            speedup_type: get(&r, "Estimated Speedup Type"),
            speedup: get(&r, "Estimated Speedup"),
        })
        .collect()
}

fn rule_type(t: &str) -> NcuRuleType {
    match t {
        "OPT" => NcuRuleType::Opt,
        "WRN" => NcuRuleType::Wrn,
        "INF" => NcuRuleType::Inf,
        "ERR" => NcuRuleType::Err,
        _ => NcuRuleType::Other,
    }
}

/// Rule findings and the Duration row of a details page against the report, launch by launch.
fn check_against_details(report_rel: &str, details_rel: &str) -> (usize, usize) {
    let p = report(report_rel);
    let rows = read_details(details_rel);
    let mut ids: Vec<u64> = rows.iter().map(|r| r.id).collect();
    ids.dedup();
    ids.sort();
    ids.dedup();
    assert_eq!(ids, (0..p.launches.len() as u64).collect::<Vec<_>>(), "launch IDs");
    let mut rules_checked = 0;
    for l in &p.launches {
        let mine: Vec<&DetailsRow> = rows.iter().filter(|r| r.id == l.id).collect();
        let ctx = format!("{report_rel} launch {}", l.id);
        // Launch dimensions and duration (details pages use display units: ns/us/ms).
        assert_eq!(dims(&mine[0].block), l.block_size, "{ctx}");
        assert_eq!(dims(&mine[0].grid), l.grid_size, "{ctx}");
        let dur = mine.iter().find(|r| r.section == "GPU Speed Of Light Throughput" && r.metric == "Duration").expect("Duration row");
        let (want, unit, eps) = csv_number(&dur.value, &dur.unit).unwrap();
        assert_eq!(unit, Unit::Nanoseconds);
        let got = duration_ns(l);
        assert!(relative_eq!(got, want, epsilon = eps * 1.0001), "{ctx}: duration {got} ns vs CSV {} {}", dur.value, dur.unit);
        if !mine[0].kernel.is_empty() && !l.name.starts_with("void ") {
            assert_eq!(mine[0].kernel, l.name, "{ctx}");
        }

        // Rule findings: same rules, types, speedups and (rendered) messages, in any order.
        let csv_rules: Vec<&&DetailsRow> = mine.iter().filter(|r| !r.rule_type.is_empty()).collect();
        assert_eq!(csv_rules.len(), l.ncu_rules.len(), "{ctx}: rule count; report has {:#?}", l.ncu_rules);
        for c in csv_rules {
            let found = l.ncu_rules.iter().find(|r| r.rule == c.rule && r.message == c.message);
            let Some(r) = found else {
                panic!("{ctx}: CSV rule {} {:?} not in report rules {:#?}", c.rule, c.message, l.ncu_rules);
            };
            assert_eq!(r.kind, rule_type(&c.rule_type), "{ctx}: {}", c.rule);
            assert_eq!(r.section.as_deref().unwrap_or(""), c.section, "{ctx}: {}", c.rule);
            assert_eq!(r.speedup_type.as_deref().unwrap_or(""), c.speedup_type, "{ctx}: {}", c.rule);
            match (r.speedup_pct, c.speedup.parse::<f64>().ok()) {
                (Some(a), Some(b)) => assert!(relative_eq!(a, b, epsilon = 0.0051), "{ctx}: {} speedup {a} vs {b}", c.rule),
                (None, None) => {}
                (a, b) => panic!("{ctx}: {} speedup {a:?} vs CSV {b:?}", c.rule),
            }
            rules_checked += 1;
        }
    }
    (p.launches.len(), rules_checked)
}

#[test]
fn h200_report_matches_details_csv_by_launch_order() {
    if !corpus_present() {
        return;
    }
    let (launches, rules) = check_against_details("h200-moe/decode_c1.ncu-rep", "h200-moe/decode_c1_details.csv");
    assert_eq!(launches, 20);
    assert!(rules >= 20, "only {rules} rule findings compared");
}

#[test]
fn rtx3060_report_matches_details_csv() {
    if !corpus_present() {
        return;
    }
    let (launches, rules) = check_against_details("rtx3060-sassscope/profile.ncu-rep", "rtx3060-sassscope/details.csv");
    assert_eq!((launches, rules), (1, 6));
}

/// Per-instruction counters (instance values keyed by PC) against ncu's own source page export.
#[test]
fn rtx3060_source_view_matches_source_sass_csv() {
    if !corpus_present() {
        return;
    }
    let p = report("rtx3060-sassscope/profile.ncu-rep");
    let src = p.launches[0].source.as_ref().expect("the report has source counters");
    assert_eq!(src.view, "sass");

    // source_sass.csv: a "Kernel Name" line, then a header with "Address", then one row per SASS instruction.
    let mut rdr =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).from_path(corpus("rtx3060-sassscope/source_sass.csv")).unwrap();
    let records: Vec<Vec<String>> = rdr.records().map(|r| r.unwrap().iter().map(str::to_string).collect()).collect();
    let hi = records.iter().position(|r| r.first().map(String::as_str) == Some("Address")).unwrap();
    let header = &records[hi];
    let by_address: BTreeMap<&str, &Vec<String>> = records[hi + 1..].iter().map(|r| (r[0].as_str(), r)).collect();

    let mut compared = 0;
    for (ci, column) in src.columns.iter().enumerate() {
        let Some(csv_col) = header.iter().position(|h| h == column) else {
            continue;
        };
        for row in &src.rows {
            let addr = row.address.as_deref().unwrap();
            let csv_row = by_address.get(addr).unwrap_or_else(|| panic!("address {addr} not in source_sass.csv"));
            let want = parse_number(&csv_row[csv_col], NumberLocale::DotDecimal)
                .unwrap_or_else(|_| panic!("{column} at {addr}: CSV has {:?}", csv_row[csv_col]));
            assert_eq!(row.values[ci], want, "{column} at {addr}");
            compared += 1;
        }
    }
    // The 18 executed instructions (of 32) have rows; 7 counter columns exist in both.
    assert_eq!(src.rows.len(), 18);
    assert!(compared >= 18 * 6, "only {compared} cells compared; columns {:?}", src.columns);
    // Instructions the report has no row for were never executed.
    for (addr, r) in &by_address {
        if !src.rows.iter().any(|row| row.address.as_deref() == Some(*addr)) {
            let ie = header.iter().position(|h| h == "Instructions Executed").unwrap();
            assert_eq!(r[ie], "0", "{addr}");
        }
    }
}

/// An older report (no list of source metrics) with PC sampling data: the built-in column list
/// applies, and the per-instruction values add up to the launch totals stored in the report.
#[test]
fn addconstdouble_source_view_adds_up() {
    if !corpus_present() {
        return;
    }
    let p = report("rtxa2000-sample/addConstDouble.ncu-rep");
    let l = &p.launches[0];
    let src = l.source.as_ref().expect("the report has PC sampling data");
    let col = |label: &str| src.columns.iter().position(|c| c == label).unwrap_or_else(|| panic!("no column {label}"));
    let total = |c: usize| src.rows.iter().map(|r| r.values[c].unwrap()).sum::<f64>();
    let (all, samples, inst) = (col("Warp Stall Sampling (All Samples)"), col("# Samples"), col("Instructions Executed"));
    for r in &src.rows {
        assert_eq!(r.values[all], r.values[samples], "{:?}", r.address);
        assert!(r.address.as_deref().unwrap().starts_with("0x"));
    }
    assert_eq!(src.rows.len(), 15);
    assert_eq!(total(samples), l.metrics.get("smsp__pcsamp_sample_count").unwrap().as_f64().unwrap());
    assert_eq!(total(inst), l.metrics.get("inst_executed").unwrap().as_f64().unwrap());
    let ls = col("smsp__pcsamp_warps_issue_stalled_long_scoreboard");
    assert_eq!(total(ls), l.metrics.get("smsp__pcsamp_warps_issue_stalled_long_scoreboard").unwrap().as_f64().unwrap());
}

/// Labels and sections come from the section definitions stored in the report.
#[test]
fn metrics_carry_section_labels() {
    if !corpus_present() {
        return;
    }
    let p = report("h200-moe/decode_c1.ncu-rep");
    let d = &p.launches[0].metrics.get("gpu__time_duration.sum").unwrap();
    assert_eq!(d.label, Some("Duration"));
    assert_eq!(d.section, Some("GPU Speed Of Light Throughput"));
    assert_eq!(d.raw_unit, "");
    assert!(matches!(d.origin, keet::profile::Origin::Report { .. }), "{}", d.origin);
    assert_eq!(p.launches[0].compute_capability.as_deref(), Some("9.0"));
    assert_eq!(p.launches[0].process_name.as_deref(), Some("python3.11"));
    assert_eq!(p.launches[0].process_id, Some(2477000));
}

/// The same comparison through keet's own CSV reader (`profile::csv_pages`), once it reads raw
/// pages: every numeric metric of the CSV launch must match the report within CSV rounding.
#[test]
fn csv_reader_twin_agrees() {
    if !corpus_present() {
        return;
    }
    let rep = report("rtx3060-sassscope/profile.ncu-rep");
    let csv = match profile::read_path(&corpus("rtx3060-sassscope/raw.csv")) {
        Ok(p) => p,
        Err(e) => panic!("keet's CSV reader cannot read the raw.csv twin yet: {e}"),
    };
    assert_eq!(csv.launches.len(), rep.launches.len());
    let (a, b) = (&rep.launches[0], &csv.launches[0]);
    assert_eq!((a.grid_size, a.block_size), (b.grid_size, b.block_size));
    let mut compared = 0;
    for (name, m) in &b.metrics {
        let (Some(want), Some(got)) = (m.as_f64(), a.metrics.get(name).and_then(|x| x.as_f64())) else {
            continue;
        };
        let (factor, _) = normalize_unit(m.raw_unit);
        assert!(
            relative_eq!(got, want, epsilon = 0.005 * factor * 1.0001 + 1e-9, max_relative = 1e-6),
            "{name}: report {got} vs CSV reader {want} ({} {})",
            m.raw_value,
            m.raw_unit
        );
        compared += 1;
    }
    assert!(compared >= 550, "only {compared} metrics compared");
}

/// A details page through keet's CSV reader (display labels mapped to raw names by
/// `profile::names`): every metric both sides have must agree within the page's display rounding.
fn details_through_csv_reader(report_rel: &str, details_rel: &str) -> usize {
    let rep = report(report_rel);
    let csv = profile::read_path(&corpus(details_rel)).unwrap_or_else(|e| panic!("keet's CSV reader cannot read {details_rel}: {e}"));
    assert_eq!(csv.launches.len(), rep.launches.len());
    let (mut compared, mut failures) = (0, Vec::new());
    for (a, b) in rep.launches.iter().zip(&csv.launches) {
        assert_eq!((a.grid_size, a.block_size), (b.grid_size, b.block_size), "launch {}", a.id);
        for (name, m) in &b.metrics {
            let (Some(want), Some(got)) = (m.as_f64(), a.metrics.get(name).and_then(|x| x.as_f64())) else {
                continue;
            };
            // Details pages print 2 decimals (or 3 significant digits) in the displayed unit.
            let (factor, _) = normalize_unit(m.raw_unit);
            if !relative_eq!(got, want, epsilon = 0.005 * factor * 1.0001 + 1e-9, max_relative = 0.005) {
                failures.push(format!("launch {} {name}: report {got} vs CSV {} {}", a.id, m.raw_value, m.raw_unit));
            }
            compared += 1;
        }
    }
    eprintln!("{details_rel}: {compared} metric values compared; disagreements:\n{}", failures.join("\n"));
    assert!(failures.is_empty(), "{} of {compared} disagree", failures.len());
    compared
}

#[test]
fn details_pages_through_csv_reader_agree() {
    if !corpus_present() {
        return;
    }
    let n = details_through_csv_reader("h200-moe/decode_c1.ncu-rep", "h200-moe/decode_c1_details.csv");
    assert!(n >= 20 * 20, "only {n} compared");
    let n = details_through_csv_reader("rtx3060-sassscope/profile.ncu-rep", "rtx3060-sassscope/details.csv");
    assert!(n >= 20, "only {n} compared");
}

/// `cargo test --release --test integration ncu_rep_corpus -- --ignored --nocapture time_` prints the parse time.
#[test]
#[ignore]
fn time_decode_c1() {
    let path = corpus("h200-moe/decode_c1.ncu-rep");
    let bytes = std::fs::read(&path).unwrap();
    let mut best = f64::MAX;
    for _ in 0..20 {
        let t = std::time::Instant::now();
        let p = profile::read_bytes(&path, &bytes).unwrap();
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(p.launches.len(), 20);
    }
    eprintln!("decode_c1.ncu-rep ({} bytes): best of 20 = {best:.2} ms", bytes.len());
}
