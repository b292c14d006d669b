//! CSV exports in other encodings read like their UTF-8 originals: UTF-16 LE with a BOM (what
//! PowerShell's `ncu --csv ... > out.csv` writes), UTF-16 BE with a BOM, UTF-16 LE without a BOM,
//! and UTF-8 with a BOM. Each is made at test time, in a temporary directory, from corpus CSV
//! files of every page kind, and must give the same launches with the same metrics (name, value,
//! unit, raw value and raw unit) as the original.

use keet::profile::{self, Profile};
use std::path::Path;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus");

const FILES: &[&str] = &[
    "rtx3060-sassscope/details.csv",
    "rtx3060-sassscope/raw.csv",
    "rtx3080ti-sassscope/probe_ffma_raw.csv",
    "h200-moe/decode_c1_details.csv",
    "h200-moe/cutlass_microbench_mixed_stdout.csv",
    "cc86-esmm/metrics.csv",
    "rtx3060-sassscope/ui_raw_export.csv",
];

/// Everything a reader gives for one profile, as comparable text.
fn dump(p: &Profile) -> Vec<String> {
    let mut out = Vec::new();
    for l in &p.launches {
        out.push(format!("{} {} {:?} {:?} {}", l.id, l.name, l.grid_size, l.block_size, l.metrics.len()));
        for (name, m) in l.metrics.iter() {
            out.push(format!("  {name} {:?} {} {:?} {:?} {}", m.value, m.unit, m.raw_value, m.raw_unit, m.origin));
        }
        out.push(format!("  rules {:?}", l.ncu_rules));
    }
    out
}

fn encodings(text: &str) -> Vec<(&'static str, Vec<u8>)> {
    let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let be: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
    vec![
        ("utf16le-bom", [&[0xff, 0xfe][..], &le].concat()),
        ("utf16be-bom", [&[0xfe, 0xff][..], &be].concat()),
        ("utf16le-nobom", le),
        ("utf8-bom", [&[0xef, 0xbb, 0xbf][..], text.as_bytes()].concat()),
    ]
}

#[test]
fn utf16_and_bom_exports_read_like_their_originals() {
    let dir = tempfile::tempdir().unwrap();
    for rel in FILES {
        let src = Path::new(CORPUS).join(rel);
        let original = profile::read_path(&src).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let bytes = std::fs::read(&src).unwrap();
        // The GUI export already starts with a UTF-8 BOM: encode the text after it.
        let text = std::str::from_utf8(&bytes).unwrap().trim_start_matches('\u{feff}');
        let want = dump(&original);
        assert!(want.len() > original.launches.len(), "{rel}: no metrics");
        for (kind, data) in encodings(text) {
            let path = dir.path().join(format!("{kind}.csv"));
            std::fs::write(&path, &data).unwrap();
            let p = profile::read_path(&path).unwrap_or_else(|e| panic!("{rel} as {kind}: {e}"));
            assert_eq!(p.kind, original.kind, "{rel} as {kind}");
            let got = dump(&p);
            if let Some(i) = (0..want.len().max(got.len())).find(|&i| want.get(i) != got.get(i)) {
                panic!("{rel} as {kind}: differs at item {i}:\n  original {:?}\n  decoded  {:?}", want.get(i), got.get(i));
            }
            if kind.starts_with("utf16") {
                assert!(p.notes.iter().any(|n| n.contains("UTF-16")), "{rel} as {kind}: {:?}", p.notes);
            }
        }
    }
}

#[test]
fn errors_in_a_utf16_file_name_the_original_line() {
    // A details page whose 3rd data row has a bad ID: the message names line 4 in every encoding.
    let src = Path::new(CORPUS).join("rtx3060-sassscope/details.csv");
    let text = std::fs::read_to_string(&src).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let header = lines.iter().position(|l| l.starts_with("\"ID\"")).unwrap();
    let bad = header + 3;
    lines[bad] = lines[bad].replacen("\"0\"", "\"zero\"", 1);
    let broken = lines.join("\r\n");
    let dir = tempfile::tempdir().unwrap();
    for (kind, data) in encodings(&broken) {
        let path = dir.path().join(format!("{kind}.csv"));
        std::fs::write(&path, &data).unwrap();
        let e = profile::read_path(&path).expect_err(kind);
        let text = e.to_string();
        assert!(text.contains(&format!("{kind}.csv:{}:", bad + 1)), "{kind}: {text}");
    }
}
