//! Unit tests of the CSV readers on small inline inputs (the real corpus is in `tests/integration/csv_corpus.rs`).

use super::*;
use crate::{MetricValue, NcuRuleType, ProfileError, SourceKind, Unit};
use std::path::Path;

const DETAILS_HEADER: &str = "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Body Item Label\",\"Metric Name\",\"Metric Unit\",\"Metric Value\",\"Rule Name\",\"Rule Type\",\"Rule Description\",\"Estimated Speedup Type\",\"Estimated Speedup\"";

fn drow(id: u32, kernel: &str, section: &str, body: &str, name: &str, unit: &str, value: &str) -> String {
    format!(
        "\"{id}\",\"100\",\"app\",\"127.0.0.1\",\"{kernel}\",\"1\",\"7\",\"(32, 8, 1)\",\"(4, 2, 1)\",\"0\",\"9.0\",\"{section}\",\"{body}\",\"{name}\",\"{unit}\",\"{value}\","
    )
}

fn read_str(s: &str) -> crate::Result<Profile> {
    read(Path::new("t.csv"), s.as_bytes())
}

fn num(p: &Profile, launch: usize, key: &str) -> f64 {
    p.launches[launch].metrics.get(key).unwrap_or_else(|| panic!("no metric {key}")).as_f64().unwrap()
}

#[test]
fn details_basic_rules_ragged_and_identity() {
    let sol = "GPU Speed Of Light Throughput";
    let text = [
        DETAILS_HEADER.to_string(),
        drow(0, "k(int, float)", sol, "", "Duration", "us", "4.06"),
        drow(0, "k(int, float)", sol, "", "DRAM Frequency", "Ghz", "3.17"),
        drow(0, "k(int, float)", sol, "", "Elapsed Cycles", "cycle", "7,973"),
        drow(0, "k(int, float)", "Launch Statistics", "", "Mystery Label", "", "n/a"),
        // A rule row: empty metric columns, all rule columns.
        "\"0\",\"100\",\"app\",\"127.0.0.1\",\"k(int, float)\",\"1\",\"7\",\"(32, 8, 1)\",\"(4, 2, 1)\",\"0\",\"9.0\",\"SpeedOfLight\",\"\",\"\",\"\",\"\",\"SOLBottleneck\",\"OPT\",\"Grid too small, see \"\"Launch\"\"\",\"local\",\"66.67\"".to_string(),
        // Same kernel name again: a different launch (ID 1); the unit varies by row.
        drow(1, "k(int, float)", sol, "", "Duration", "ns", "1,952"),
        drow(1, "k(int, float)", sol, "", "Duration", "ms", "9"),
    ]
    .join("\n");
    let p = read_str(&text).unwrap();
    assert_eq!(p.kind, SourceKind::DetailsCsv);
    assert_eq!(p.launches.len(), 2);
    let l0 = &p.launches[0];
    assert_eq!((l0.id, l0.name.as_str()), (0, "k(int, float)"));
    assert_eq!(l0.block_size, Some([32, 8, 1]));
    assert_eq!(l0.grid_size, Some([4, 2, 1]));
    assert_eq!((l0.process_id, l0.context_id, l0.stream_id, l0.device_id), (Some(100), Some(1), Some(7), Some(0)));
    assert_eq!(l0.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(num(&p, 0, "gpu__time_duration.sum"), 4060.0);
    assert_eq!(num(&p, 0, "dram__cycles_elapsed.avg.per_second"), 3.17e9);
    assert_eq!(num(&p, 0, "gpc__cycles_elapsed.max"), 7973.0);
    let d = &l0.metrics.get("gpu__time_duration.sum").unwrap();
    assert_eq!((d.raw_value, d.raw_unit, d.unit.clone()), ("4.06", "us", Unit::Nanoseconds));
    assert_eq!(d.label, Some("Duration"));
    assert_eq!(d.section, Some(sol));
    assert_eq!(d.origin.to_string(), "line 2");
    let m = &l0.metrics.get("Launch Statistics/Mystery Label").unwrap();
    assert_eq!(m.value, MetricValue::Text("n/a"));
    assert_eq!(m.as_f64(), None);
    assert_eq!(l0.ncu_rules.len(), 1);
    let r = &l0.ncu_rules[0];
    assert_eq!((r.rule.as_str(), r.kind, r.section.as_deref()), ("SOLBottleneck", NcuRuleType::Opt, Some("SpeedOfLight")));
    assert_eq!(r.message, "Grid too small, see \"Launch\"");
    assert_eq!((r.speedup_type.as_deref(), r.speedup_pct), (Some("local"), Some(66.67)));
    // Launch 1: first Duration row wins for the raw key, the unit of each row is applied.
    assert_eq!(num(&p, 1, "gpu__time_duration.sum"), 1952.0);
}

#[test]
fn details_without_body_item_label_and_quoted_commas() {
    let text = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
                \"3\",\"copy[v1,abc](Array<long long, 1, C>)\",\"Occupancy\",\"Achieved Occupancy\",\"%\",\"12.5\"\n\
                \"3\",\"copy[v1,abc](Array<long long, 1, C>)\",\"Memory Workload Analysis\",\"Memory Throughput\",\"Gbyte/s\",\"1.5\"\n";
    let p = read_str(text).unwrap();
    assert_eq!(p.launches.len(), 1);
    assert_eq!(p.launches[0].name, "copy[v1,abc](Array<long long, 1, C>)");
    assert_eq!(num(&p, 0, "sm__warps_active.avg.pct_of_peak_sustained_active"), 12.5);
    assert_eq!(num(&p, 0, "dram__bytes.sum.per_second"), 1.5e9);
}

#[test]
fn comma_decimal_locale() {
    let text = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
                \"0\",\"k\",\"GPU Speed Of Light Throughput\",\"Duration\",\"us\",\"4,06\"\n\
                \"0\",\"k\",\"GPU Speed Of Light Throughput\",\"Elapsed Cycles\",\"cycle\",\"1.234.567\"\n\
                \"0\",\"k\",\"GPU Speed Of Light Throughput\",\"SM Frequency\",\"Ghz\",\"1,5\"\n";
    let p = read_str(text).unwrap();
    assert_eq!(num(&p, 0, "gpu__time_duration.sum"), 4060.0);
    assert_eq!(num(&p, 0, "gpc__cycles_elapsed.max"), 1234567.0);
    assert_eq!(num(&p, 0, "gpc__cycles_elapsed.avg.per_second"), 1.5e9);
}

#[test]
fn thousands_separators_dot_decimal() {
    let text = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
                \"0\",\"k\",\"Command line profiler metrics\",\"dram__bytes.sum\",\"byte\",\"32,746,880\"\n\
                \"0\",\"k\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"nsecond\",\"10,776,576\"\n\
                \"0\",\"k\",\"Command line profiler metrics\",\"sm__cycles_elapsed.avg.per_second\",\"cycle/nsecond\",\"1.41\"\n";
    let p = read_str(text).unwrap();
    assert_eq!(p.kind, SourceKind::MetricsCsv);
    assert_eq!(num(&p, 0, "dram__bytes.sum"), 32746880.0);
    assert_eq!(num(&p, 0, "gpu__time_duration.sum"), 10776576.0);
    assert_eq!(num(&p, 0, "sm__cycles_elapsed.avg.per_second"), 1.41e9);
    assert_eq!(p.launches[0].metrics.get("dram__bytes.sum").unwrap().label, None);
}

#[test]
fn tool_lines_app_output_and_traceback_are_noted() {
    let text = "==PROF== Connected to process 5 (/bin/app)\n\
                starting app\n\
                \"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
                \"0\",\"k\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"nsecond\",\"100\"\n\
                WARMUP DONE — entering measurement\n\
                \"quoted app output\"\n\
                ==WARNING== something\n\
                \"1\",\"k\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"nsecond\",\"200\"\n\
                ==PROF== Disconnected from process 5\n\
                Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom\n";
    let p = read_str(text).unwrap();
    assert_eq!(p.launches.len(), 2);
    assert_eq!(num(&p, 1, "gpu__time_duration.sum"), 200.0);
    let notes = p.notes.join("\n");
    assert!(notes.contains("3 ncu message line(s)") && notes.contains("1, 7, 9"), "{notes}");
    assert!(notes.contains("3 line(s) that are not part of the CSV table") && notes.contains("2, 5-6"), "{notes}");
    assert!(notes.contains("stopped at line 10") && notes.contains("3 line(s) not read"), "{notes}");
}

#[test]
fn no_data_is_a_clear_error() {
    let only_prof = "==PROF== Connected to process 1 (/x)\n==PROF== Connected to process 2 (/x)\n";
    match read_str(only_prof) {
        Err(ProfileError::Empty { path, message }) => {
            assert_eq!(path, Path::new("t.csv"));
            assert!(message.contains("only ==PROF== lines (2 line(s)), no CSV header"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    match read_str("") {
        Err(ProfileError::Empty { message, .. }) => assert!(message.contains("empty"), "{message}"),
        other => panic!("{other:?}"),
    }
    match read_str("hello\nworld\n") {
        Err(ProfileError::Empty { message, .. }) => assert!(message.contains("first at line 1: \"hello\""), "{message}"),
        other => panic!("{other:?}"),
    }
    // A header and nothing else.
    match read_str(DETAILS_HEADER) {
        Err(ProfileError::Empty { message, .. }) => assert!(message.contains("header at line 1 but no data rows"), "{message}"),
        other => panic!("{other:?}"),
    }
    let err = read_str(only_prof).unwrap_err().to_string();
    assert!(err.starts_with("t.csv: no profile data"), "{err}");
}

#[test]
fn malformed_rows_name_the_line() {
    let text = format!("{DETAILS_HEADER}\n{}\n\"zero\",\"1\"\n", drow(0, "k", "Occupancy", "", "Achieved Occupancy", "%", "1"));
    match read_str(&text) {
        Err(ProfileError::Csv { line, message, .. }) => {
            assert_eq!(line, 3);
            assert!(message.contains("launch ID") && message.contains("\"zero\""), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let text = format!("{DETAILS_HEADER}\n\"0\",\"1\",\"app\",\"h\",\"k\",\"1\",\"7\",\"(1, 1, 1)\",\"(1, 1, 1)\",\"0\",\"8.6\",\"Occupancy\",\"\",\"Achieved Occupancy\"\n");
    match read_str(&text) {
        Err(ProfileError::Csv { line, message, .. }) => {
            assert_eq!(line, 2);
            assert!(message.contains("Metric Value"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let text = format!("{DETAILS_HEADER}\n\"0\",\"1\",\"app\",\"h\",\"k(unterminated\n");
    match read_str(&text) {
        Err(e @ ProfileError::Csv { line: 2, .. }) => assert!(e.to_string().starts_with("t.csv:2: a quoted field")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn page_ending_inside_a_quoted_field_keeps_the_complete_rows() {
    let sol = "GPU Speed Of Light Throughput";
    let rows = [
        DETAILS_HEADER.to_string(),
        drow(0, "a", sol, "", "Duration", "ns", "10"),
        drow(1, "b", sol, "", "Duration", "ns", "20"),
        // Cut off mid-write inside the kernel name of line 4.
        "\"2\",\"100\",\"app\",\"127.0.0.1\",\"c(int".to_string(),
    ];
    for par in [false, true] {
        match read_with(Path::new("t.csv"), rows.join("\n").as_bytes(), par) {
            Err(e @ ProfileError::Truncated { .. }) => {
                assert!(e.to_string().starts_with("t.csv: line 4: the file ends early: a quoted field"), "{e}");
                let ProfileError::Truncated { at, launches, recovered, .. } = e else { unreachable!() };
                assert_eq!((at, launches), (crate::At::Line(4), 2));
                let names: Vec<&str> = recovered.launches.iter().map(|l| l.name.as_str()).collect();
                assert_eq!(names, ["a", "b"]);
                assert_eq!(num(&recovered, 1, "gpu__time_duration.sum"), 20.0);
                assert!(recovered.notes.iter().any(|n| n.starts_with("line 4: the file ends early")), "{:?}", recovered.notes);
            }
            other => panic!("{other:?}"),
        }
    }
    // A raw page (wide): the units row and one launch survive, the cut row is dropped.
    let raw = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n\"0\",\"k\",\"5\"\n\"1\",\"k\",\"6";
    match read_str(raw) {
        Err(ProfileError::Truncated { at, recovered, .. }) => {
            assert_eq!(at, crate::At::Line(4));
            assert_eq!(recovered.launches.len(), 1);
            assert_eq!(num(&recovered, 0, "gpu__time_duration.sum"), 5.0);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn mangled_names_are_demangled() {
    let text = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
                \"0\",\"_Z6kernelPfi\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"ns\",\"1\"\n";
    let p = read_str(text).unwrap();
    assert_eq!(p.launches[0].name, "kernel(float*, int)");
    assert_eq!(p.launches[0].mangled_name.as_deref(), Some("_Z6kernelPfi"));
    assert_eq!(demangle("_Znot a name"), None);
}

#[test]
fn details_body_items_and_duplicates() {
    let wd = "GPU and Memory Workload Distribution";
    let text = [
        DETAILS_HEADER.to_string(),
        drow(0, "k", wd, "Workload Distribution", "L2 Active Cycles", "cycle", "203.67"),
        drow(0, "k", wd, "Workload Distribution", "L2 Active Cycles", "cycle", "453"),
        drow(0, "k", wd, "Workload Distribution", "L2 Active Cycles", "cycle", "37"),
        drow(0, "k", wd, "Workload Distribution", "L2 Active Cycles", "cycle", "3,666"),
        drow(0, "k", "Launch Statistics", "", "Block Size", "", "256"),
        drow(0, "k", "Occupancy", "Impact of Varying Block Size", "Block Size", "", "256"),
        drow(0, "k", "Occupancy", "Chart X", "Thing", "", "1"),
        drow(0, "k", "Occupancy", "Chart X", "Thing", "", "2"),
    ]
    .join("\n");
    let p = read_str(&text).unwrap();
    assert_eq!(num(&p, 0, "lts__cycles_active.avg"), 203.67);
    assert_eq!(num(&p, 0, "lts__cycles_active.max"), 453.0);
    assert_eq!(num(&p, 0, "lts__cycles_active.min"), 37.0);
    assert_eq!(num(&p, 0, "lts__cycles_active.sum"), 3666.0);
    assert_eq!(num(&p, 0, "launch__block_size"), 256.0);
    assert_eq!(p.launches[0].metrics.get("launch__block_size").unwrap().section, Some("Launch Statistics"));
    assert_eq!(num(&p, 0, "Occupancy/Chart X/Thing"), 1.0);
    assert_eq!(num(&p, 0, "Occupancy/Chart X/Thing #2"), 2.0);
}

const RAW: &str = "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"gpu__time_duration.sum\",\"dram__bytes.sum\",\"launch__func_cache_config\",\"sm__cycles_active.avg\"\n\
\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"usecond\",\"Kbyte\",\"\",\"cycle\"\n\
\"0\",\"9\",\"a\",\"h\",\"k1\",\"1\",\"7\",\"(128, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"2.464000\",\"1,024\",\"CachePreferNone\",\"\"\n\
\"1\",\"9\",\"a\",\"h\",\"k2\",\"1\",\"7\",\"(64, 1, 1)\",\"(2, 1, 1)\",\"0\",\"9.0\",\"3.296000\",\"n/a\",\"CachePreferNone\",\"31.93\"\n";

#[test]
fn raw_page_units_row() {
    let p = read_str(RAW).unwrap();
    assert_eq!(p.kind, SourceKind::RawCsv);
    assert_eq!(p.launches.len(), 2);
    assert_eq!(num(&p, 0, "gpu__time_duration.sum"), 2464.0);
    assert_eq!(num(&p, 0, "dram__bytes.sum"), 1024e3);
    assert_eq!(num(&p, 1, "gpu__time_duration.sum"), 3296.0);
    assert_eq!(p.launches[1].metrics.get("dram__bytes.sum").unwrap().value, MetricValue::Text("n/a"));
    assert_eq!(p.launches[0].metrics.get("launch__func_cache_config").unwrap().value, MetricValue::Text("CachePreferNone"));
    // Empty cell: metric absent for that launch.
    assert!(!p.launches[0].metrics.contains_key("sm__cycles_active.avg"));
    assert_eq!(p.launches[1].metrics.get("sm__cycles_active.avg").unwrap().origin.to_string(), "line 4");
    assert_eq!(p.launches[1].name, "k2");
    assert_eq!(p.launches[1].grid_size, Some([2, 1, 1]));
}

#[test]
fn raw_page_repeated_id_is_merged() {
    let text =
        format!("{RAW}\"1\",\"9\",\"a\",\"h\",\"k2\",\"1\",\"7\",\"(64, 1, 1)\",\"(2, 1, 1)\",\"0\",\"9.0\",\"9\",\"5\",\"\",\"\"\n");
    let p = read_str(&text).unwrap();
    assert_eq!(p.launches.len(), 2);
    assert_eq!(num(&p, 1, "gpu__time_duration.sum"), 3296.0);
    assert!(p.notes.iter().any(|n| n.contains("line(s) 5")), "{:?}", p.notes);
}

#[test]
fn raw_page_comma_decimal_and_bad_rows() {
    let text = RAW.replace("2.464000", "2,464").replace("3.296000", "3,296").replace("31.93", "31,93").replace("1,024", "1.024");
    let p = read_str(&text).unwrap();
    assert_eq!(num(&p, 0, "gpu__time_duration.sum"), 2464.0);
    assert_eq!(num(&p, 0, "dram__bytes.sum"), 1024e3);
    assert_eq!(num(&p, 1, "sm__cycles_active.avg"), 31.93);
    let text = format!(
        "{RAW}\"2\",\"9\",\"a\",\"h\",\"k3\",\"1\",\"7\",\"(1, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"1\",\"2\",\"x\",\"3\",\"extra\"\n"
    );
    match read_str(&text) {
        Err(ProfileError::Csv { line: 5, message, .. }) => assert!(message.contains("at most 15 fields"), "{message}"),
        other => panic!("{other:?}"),
    }
}

/// A raw page large enough for the parallel reader, whose rows are kept as the tokenizer's index
/// and parsed when read: the locale is learnt from any row, kernel names with commas and
/// thousands separators do not make it comma-decimal, padded values are trimmed, and a value
/// with escaped quotes is kept as text.
#[test]
fn raw_page_rows_read_in_parallel_parse_when_read() {
    let row = |id: usize, value: &str| {
        format!("\"{id}\",\"9\",\"a\",\"h\",\"void k<{id}, 2>(int, float)\",\"1\",\"7\",\"(64, 1, 1)\",\"(2, 1, 1)\",\"0\",\"9.0\",\"{value}\",\"1,024\",\"  Cache Prefer None \",\"3\"\n")
    };
    let mut text = RAW.to_string();
    for id in 2..1000 {
        text.push_str(&row(id, "4.500"));
    }
    let p = read_str(&text).unwrap();
    assert_eq!(p.launches.len(), 1000);
    let last = &p.launches[999];
    assert_eq!(last.name, "void k<999, 2>(int, float)");
    assert_eq!(num(&p, 999, "gpu__time_duration.sum"), 4500.0);
    assert_eq!(num(&p, 999, "dram__bytes.sum"), 1024e3);
    let padded = last.metrics.get("launch__func_cache_config").unwrap();
    assert_eq!((padded.value, padded.raw_value), (MetricValue::Text("Cache Prefer None"), "Cache Prefer None"));
    assert_eq!(last.metrics.get("sm__cycles_active.avg").unwrap().origin.to_string(), "line 1002");
    assert_eq!(last.metrics.len(), 4);

    // One decimal comma in a late row: the whole page is comma-decimal ("1,024" is 1.024 Kbyte).
    let late = text.replacen(&row(900, "4.500"), &row(900, "4,5"), 1);
    let p = read_str(&late).unwrap();
    assert_eq!(num(&p, 0, "dram__bytes.sum"), 1.024e3);
    assert_eq!(num(&p, 900, "gpu__time_duration.sum"), 4500.0);
    assert_eq!(num(&p, 999, "dram__bytes.sum"), 1.024e3);

    // A value with escaped quotes: that line is read field by field, same page otherwise.
    let quoted = text.replacen(&row(500, "4.500"), &row(500, "4.500").replace("  Cache Prefer None ", "say \"\"hi\"\""), 1);
    let p = read_str(&quoted).unwrap();
    assert_eq!(p.launches[500].metrics.get("launch__func_cache_config").unwrap().value, MetricValue::Text("say \"hi\""));
    assert_eq!(num(&p, 500, "gpu__time_duration.sum"), 4500.0);
    assert_eq!(num(&p, 501, "gpu__time_duration.sum"), 4500.0);
}

#[test]
fn source_page_sass_and_cuda_views() {
    let sass = "\"Kernel Name\",\"probe\",\n\
                \"Address\",\"Source\",\"Warp Stall Sampling (All Samples)\",\"Instructions Executed\",\n\
                \"0x700e7d100\",\"      IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28]\",\"0\",\"1\"\n\
                \"0x700e7d110\",\"@P0   EXIT\",\"-\",\"3\"\n";
    let p = read_str(sass).unwrap();
    assert_eq!(p.kind, SourceKind::SourceCsv);
    let l = &p.launches[0];
    assert_eq!(l.name, "probe");
    let v = l.source.as_ref().unwrap();
    assert_eq!(v.view, "sass");
    assert_eq!(v.columns, vec!["Warp Stall Sampling (All Samples)", "Instructions Executed"]);
    assert_eq!(v.rows.len(), 2);
    assert_eq!(v.rows[0].address.as_deref(), Some("0x700e7d100"));
    assert_eq!(v.rows[0].text, "      IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28]");
    assert_eq!(v.rows[1].values, vec![None, Some(3.0)]);

    let cuda = "\"File Path\",\"C:/src/k.cu\"\n\"Function Name\",\"probe\"\n\
                \"Line No\",\"Source\",\"Address\",\"Source\",\"Instructions Executed\"\n\
                \"83\",\"extern \"C\" __global__ void probe(\",\"-\",\"-\",\"1\"\n\
                \"\",\"\",\"0x700e7d100\",\"      IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28]\",\"1\"\n";
    let p = read_str(cuda).unwrap();
    let v = p.launches[0].source.as_ref().unwrap();
    assert_eq!(v.view, "cuda,sass");
    assert_eq!(v.rows[0].text, "extern \"C\" __global__ void probe(");
    assert_eq!((v.rows[0].line, v.rows[0].address.as_deref(), v.rows[0].file.as_deref()), (Some(83), None, Some("C:/src/k.cu")));
    assert_eq!((v.rows[1].line, v.rows[1].address.as_deref()), (Some(83), Some("0x700e7d100")));
    assert_eq!(v.rows[1].text, "      IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28]");

    // Attach to the matching launch of another export.
    let mut target = read_str(&RAW.replace("\"k2\"", "\"void probe(int)\"")).unwrap();
    assert_eq!(attach_source(&mut target, &p), Ok(1));
    assert!(target.launches[1].source.is_some() && target.launches[0].source.is_none());
    let mut other = read_str(RAW).unwrap();
    assert!(attach_source(&mut other, &p).is_err());
}

#[test]
fn ui_export_transposed() {
    let text = "\u{feff}ID,0,1\n\
                Function Name,k,k\n\
                Demangled Name,k(int),k(int)\n\
                Process,[28264] app.exe,[28264] app.exe\n\
                Grid Size,\"    4,    2,    1\",\"    1,    1,    1\"\n\
                Block Size [block],\"    32,    1,    1\",\"    1,    1,    1\"\n\
                gpu__time_duration.sum [us],4.61,984.83\n\
                gpc__cycles_elapsed.max [cycle],\"2,636\",\"576,056\"\n\
                SM_A.TriageAC.l1tex__data_pipe_lsu_wavefronts.avg,0.05 {443},{12}\n\
                launch__stream_id,7,7\n";
    let p = read_str(text).unwrap();
    assert_eq!(p.kind, SourceKind::UiExportCsv);
    assert_eq!(p.launches.len(), 2);
    let l = &p.launches[0];
    assert_eq!((l.name.as_str(), l.process_id, l.process_name.as_deref()), ("k(int)", Some(28264), Some("app.exe")));
    assert_eq!((l.grid_size, l.block_size, l.stream_id), (Some([4, 2, 1]), Some([32, 1, 1]), Some(7)));
    assert_eq!(num(&p, 0, "gpu__time_duration.sum"), 4610.0);
    assert_eq!(num(&p, 1, "gpu__time_duration.sum"), 984830.0);
    assert_eq!(num(&p, 1, "gpc__cycles_elapsed.max"), 576056.0);
    assert_eq!(num(&p, 0, "SM_A.TriageAC.l1tex__data_pipe_lsu_wavefronts.avg"), 0.05);
    let m = &p.launches[1].metrics.get("SM_A.TriageAC.l1tex__data_pipe_lsu_wavefronts.avg").unwrap();
    assert_eq!((m.value, m.raw_value), (MetricValue::Text("{12}"), "{12}"));
}

#[test]
fn unit_scaling_keeps_decimal_precision() {
    use NumberLocale::*;
    assert_eq!(scale(8.03, 1e3, "8.03", DotDecimal), 8030.0);
    assert_eq!(scale(1.2345, 1e3, "1.2345", DotDecimal), 1234.5);
    assert_eq!(scale(8.03, 1e3, "8,03", CommaDecimal), 8030.0);
    assert_eq!(scale(3.17, 1e9, "3.17", DotDecimal), 3.17e9);
    assert_eq!(scale(2.0, 1024.0, "2", DotDecimal), 2048.0);
}

#[test]
fn utf16_files_are_decoded() {
    let text = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\r\n\
                \"0\",\"k\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"nsecond\",\"1,500\"\r\n";
    let le: Vec<u8> = [0xff, 0xfe].into_iter().chain(text.encode_utf16().flat_map(|u| u.to_le_bytes())).collect();
    let be: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
    for bytes in [le, be] {
        let p = read(Path::new("w.csv"), &bytes).unwrap();
        assert_eq!(num(&p, 0, "gpu__time_duration.sum"), 1500.0);
        assert!(p.notes[0].contains("UTF-16"));
    }
    // Errors keep the original file's line numbers (one non-ASCII character on line 2).
    let bad = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
               \"0\",\"k\",\"Command line profiler metrics\",\"a\",\"µs\",\"1\"\n\
               \"zero\",\"k\",\"Command line profiler metrics\",\"b\",\"\",\"2\"\n";
    let le_no_bom: Vec<u8> = bad.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
    let be_bom: Vec<u8> = [0xfe, 0xff].into_iter().chain(bad.encode_utf16().flat_map(|u| u.to_be_bytes())).collect();
    for bytes in [le_no_bom, be_bom] {
        match read(Path::new("w.csv"), &bytes) {
            Err(ProfileError::Csv { line, message, .. }) => assert_eq!(line, 3, "{message}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn helpers() {
    assert_eq!(parse_dim3("(32, 8, 1)"), Some([32, 8, 1]));
    assert_eq!(parse_dim3("    1,    1,    1"), Some([1, 1, 1]));
    assert_eq!(parse_dim3("(1, 2)"), None);
    assert_eq!(parse_u64("1,234"), Some(1234));
    assert_eq!(parse_u64("x"), None);
    assert_eq!(line_list(&[1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8");
    assert!(is_tool_line("==PROF== Connected") && is_tool_line("==WARNING== x") && !is_tool_line("== x =="));
}

/// Byte-level mutations of the inline samples: any outcome but a panic is fine.
#[test]
fn mutations_never_panic() {
    let samples = [RAW.to_string(), format!("{DETAILS_HEADER}\n{}", drow(0, "k", "Occupancy", "", "Achieved Occupancy", "%", "1"))];
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for s in &samples {
        for _ in 0..400 {
            let mut b = s.as_bytes().to_vec();
            for _ in 0..(next() % 6 + 1) {
                let i = (next() as usize) % b.len();
                match next() % 4 {
                    0 => b[i] = b"\",\n\r;x0"[(next() % 7) as usize],
                    1 => {
                        b.remove(i);
                    }
                    2 => b.insert(i, (next() % 256) as u8),
                    _ => b.truncate(i),
                }
                if b.is_empty() {
                    break;
                }
            }
            let _ = read(Path::new("m.csv"), &b);
        }
    }
}

/// The parallel line reader gives exactly what the sequential one gives, notes and errors
/// included: on inputs large enough to take it, with every kind of line it must skip, and on
/// every CSV file of the corpus.
#[test]
fn parallel_and_sequential_readers_agree() {
    let json = |r: crate::Result<Profile>| match r {
        Ok(p) => serde_json::to_string(&p).unwrap(),
        Err(e) => format!("error: {e}"),
    };
    let same = |name: &str, text: &[u8]| {
        let par = json(read_with(Path::new(name), text, true));
        let seq = json(read_with(Path::new(name), text, false));
        assert!(par == seq, "{name}: parallel and sequential differ\n{}\n{}", &par[..par.len().min(400)], &seq[..seq.len().min(400)]);
    };
    // A raw page padded past the parallel threshold with long rows.
    let row = |id: usize| {
        format!(
            "\"{id}\",\"9\",\"a\",\"h\",\"k{id}\",\"1\",\"7\",\"(64, 1, 1)\",\"(2, 1, 1)\",\"0\",\"9.0\",\"{}\",\"5\",\"n/a\",\"3\"\n",
            id * 3
        )
    };
    let mut big = RAW.to_string();
    for id in 2..3000 {
        big.push_str(&row(id));
        match id % 500 {
            7 => big.push_str("==PROF== Disconnected\n"),
            8 => big.push_str("application says hello\n"),
            9 => big.push_str("\n   \n"),
            10 => {
                big.push_str(RAW.lines().next().unwrap());
                big.push('\n');
            }
            11 => big.push_str("\n\"only one quoted field\"\n"),
            _ => {}
        }
    }
    same("big.csv", big.as_bytes());
    same("crlf.csv", big.replace('\n', "\r\n").as_bytes());
    same("traceback.csv", format!("{big}Traceback (most recent call last):\n  File \"x.py\"\n\"9\",\"1\"\n").as_bytes());
    // A quoted field running over two lines, a lone CR, a comma-decimal file: sequential fallback or same parse.
    same("multiline.csv", big.replacen("\"k7\"", "\"k\n7\"", 1).as_bytes());
    same("lone_cr.csv", big.replacen("\"k9\"\n", "\"k9\"\r", 1).as_bytes());
    same("unterminated.csv", format!("{big}\"5\",\"oops\n").as_bytes());
    same("comma.csv", big.replace("2.464000", "2,464").replace("1,024", "1.024").as_bytes());
    same("late_comma.csv", big.replacen("\"2997\",\"5\"", "\"2997,5\",\"5\"", 1).as_bytes());
    same("padded.csv", big.replace("\"5\",\"n/a\"", "\" 5\",\"n/a \"").as_bytes());
    same("escaped.csv", big.replacen("\"n/a\"", "\"say \"\"hi\"\"\"", 7).as_bytes());
    // Every CSV export of the corpus.
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut n = 0;
    for f in crate::expand_inputs(&[corpus]).unwrap_or_default() {
        if f.extension().is_some_and(|e| e == "csv") {
            same(&f.display().to_string(), &std::fs::read(&f).unwrap());
            n += 1;
        }
    }
    assert!(n == 0 || n >= 10, "only {n} corpus CSV files");
}
