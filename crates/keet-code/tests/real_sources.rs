//! Locating kernels in the sources that real Nsight Compute reports embed (ignored: needs the
//! corpus under ../shared and Nsight Compute's `ncu_report` Python module). The sources are dumped
//! to a temporary directory at test time and never committed.
//!
//! Run with `cargo test -p keet-code --test real_sources -- --ignored --nocapture`.

use keet_code::{locate, read_user_sources};
use std::path::Path;
use std::process::Command;

const REPORTS: &[&str] = &[
    "../../../shared/corpus/rtx4090-lashi/smemSquare.ncu-rep",
    "../../../shared/corpus/rtx4090-lashi/transpose.ncu-rep",
    "../../../shared/corpus/rtxa2000-sample/addConstDouble.ncu-rep",
];

const DUMP: &str = r#"
import os, sys, ncu_report
report = ncu_report.load_report(sys.argv[1])
out = sys.argv[2]
names = set()
for r in range(report.num_ranges()):
    rng = report.range_by_idx(r)
    for a in range(rng.num_actions()):
        action = rng.action_by_idx(a)
        names.add(action.name(ncu_report.IAction.NameBase_DEMANGLED))
        for path, text in dict(action.source_files()).items():
            target = os.path.join(out, path.lstrip('/'))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, 'w').write(text)
print('\n'.join(sorted(names)))
"#;

#[test]
#[ignore]
fn kernels_in_embedded_sources_are_found() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    for report in REPORTS {
        let path = Path::new(manifest).join(report);
        if !path.exists() {
            eprintln!("skipped {report}: not found");
            continue;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let output = Command::new("python3").arg("-c").arg(DUMP).arg(&path).arg(dir.path()).output().expect("python3");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let (files, warnings) = read_user_sources(dir.path());
        eprintln!("{report}: {} files, warnings {warnings:?}", files.len());
        for name in String::from_utf8_lossy(&output.stdout).lines() {
            match locate(&files, name) {
                Ok(kernel) => {
                    eprintln!("  {name}: {}:{}-{} launches {}", kernel.path, kernel.start_line, kernel.end_line, kernel.launch_sites.len())
                }
                Err(error) => panic!("{report}: {name}: {error}"),
            }
        }
    }
}
