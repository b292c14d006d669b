//! `keet bench ingest`: ingest throughput on real files, beside Python's `csv` module as the peer.
//!
//! Prints, per file: size, keet's best-of-N ingest time and MB/s (decode, find the table, split
//! every field, normalise the units of every column, build the launches), the same plus reading
//! every metric's value (a raw page's values are parsed when read, see `profile::metrics`), and
//! for CSV files the same for `python3 -c 'csv.reader'` (which only splits fields) as the peer.

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct IngestBenchArgs {
    /// Files to time (default: the largest CSV, a details page and the 2 MB report of ../shared/corpus).
    pub files: Vec<PathBuf>,
    /// Repetitions; the best time is reported.
    #[arg(long, default_value_t = 20)]
    pub repeat: usize,
    /// Skip the Python peer.
    #[arg(long)]
    pub no_peer: bool,
}

fn default_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    vec![
        root.join("h200-moe/sglang_short_decode_raw.csv"),
        root.join("h200-moe/decode_c1_details.csv"),
        root.join("h200-moe/decode_c1.ncu-rep"),
    ]
}

const PY_PEER: &str = r#"
import csv, sys, time, io
path, n = sys.argv[1], int(sys.argv[2])
data = open(path, encoding="utf-8", errors="replace", newline="").read()
best = 1e9
for _ in range(n):
    t = time.perf_counter()
    rows = 0
    for row in csv.reader(io.StringIO(data)):
        rows += 1
    best = min(best, time.perf_counter() - t)
print(best)
"#;

pub fn run(a: IngestBenchArgs) -> anyhow::Result<i32> {
    let files = if a.files.is_empty() { default_files() } else { a.files.clone() };
    println!(
        "{:<44} {:>7} {:>9} {:>10} {:>13} {:>10} {:>9} {:>7}",
        "file", "MB", "keet ms", "keet MB/s", "+values ms", "python ms", "py MB/s", "ratio"
    );
    for f in files {
        let bytes = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
        let mb = bytes.len() as f64 / 1e6;
        let (mut best, mut best_values) = (f64::INFINITY, f64::INFINITY);
        let mut launches = 0;
        for _ in 0..a.repeat.max(1) {
            let t = Instant::now();
            let p = crate::profile::read_bytes(&f, &bytes)?;
            best = best.min(t.elapsed().as_secs_f64());
            launches = p.launches.len();
            drop(p);
            // Ingest, then every value of every launch read (parsed, for a raw page).
            let t = Instant::now();
            let p = crate::profile::read_bytes(&f, &bytes)?;
            let numbers = p.launches.iter().flat_map(|l| l.metrics.values()).filter(|m| m.as_f64().is_some()).count();
            std::hint::black_box(numbers);
            best_values = best_values.min(t.elapsed().as_secs_f64());
        }
        let is_csv = !bytes.starts_with(b"NVR\0");
        let peer = if is_csv && !a.no_peer { python_csv(&f, a.repeat) } else { None };
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match peer {
            Some(p) => println!(
                "{:<44} {:>7.3} {:>9.3} {:>10.1} {:>13.3} {:>10.3} {:>9.1} {:>6.1}x",
                format!("{name} ({launches} launches)"),
                mb,
                best * 1e3,
                mb / best,
                best_values * 1e3,
                p * 1e3,
                mb / p,
                p / best
            ),
            None => println!(
                "{:<44} {:>7.3} {:>9.3} {:>10.1} {:>13.3} {:>10} {:>9} {:>7}",
                format!("{name} ({launches} launches)"),
                mb,
                best * 1e3,
                mb / best,
                best_values * 1e3,
                "-",
                "-",
                "-"
            ),
        }
    }
    Ok(0)
}

fn python_csv(path: &Path, repeat: usize) -> Option<f64> {
    let out = std::process::Command::new("python3").arg("-c").arg(PY_PEER).arg(path).arg(repeat.to_string()).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}
