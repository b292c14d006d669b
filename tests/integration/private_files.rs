//! Safe on a shared node: run as a user would (the binary as a child process under umask 022 and
//! 077), a new cache folder is 0700 and the cache file 0600, `keet cache merge` writes the same,
//! a looser cache (or keet's own cache folder) is tightened with a note, and a report written with
//! `-o` gets the umask's mode (0644 under 022, 0600 under 077), not the temp file's 0600. A cache
//! that cannot be written is a warning naming it; the report is still printed, exit 0.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus").join(rel)
}

fn input() -> PathBuf {
    corpus("rtx4090-lashi/reduceInteger.csv")
}

/// keet under `umask`, with `KEET_CACHE` unset and the cache dir under `xdg` (never the user's).
fn keet_umask(umask: &str, xdg: &Path, args: &[&std::ffi::OsStr]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_keet"))
        .args(args)
        .env_remove("KEET_CACHE")
        .env("XDG_CACHE_HOME", xdg)
        .output()
        .expect("keet runs")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "keet failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[test]
fn cache_is_private_and_reports_follow_the_umask() {
    for (umask, report_mode) in [("022", 0o644), ("077", 0o600)] {
        let dir = tempfile::tempdir().unwrap();
        let cache_dir = dir.path().join("caches/new");
        let cache = cache_dir.join("analyses.sqlite3");
        let report = dir.path().join("report.html");
        let o = keet_umask(
            umask,
            dir.path(),
            &[
                os("explain"),
                input().as_os_str(),
                os("--no-llm"),
                os("--top"),
                os("2"),
                os("--format"),
                os("html"),
                os("--cache"),
                cache.as_os_str(),
                os("-o"),
                report.as_os_str(),
            ],
        );
        let stderr = ok(&o);
        assert!(!stderr.contains("note:"), "umask {umask}: nothing to tighten in a new cache: {stderr}");
        assert_eq!(mode(&cache_dir), 0o700, "umask {umask}: cache folder");
        assert_eq!(mode(&dir.path().join("caches")), 0o700, "umask {umask}: every folder keet created");
        assert_eq!(mode(&cache), 0o600, "umask {umask}: cache file");
        for e in std::fs::read_dir(&cache_dir).unwrap().flatten() {
            assert_eq!(mode(&e.path()), 0o600, "umask {umask}: {}", e.path().display());
        }
        assert!(keet::cache::Cache::open(&cache).unwrap().len().unwrap() >= 1, "the run was cached");
        assert_eq!(mode(&report), report_mode, "umask {umask}: report");
        assert!(std::fs::read_to_string(&report).unwrap().contains("<html"));

        // `keet cache merge` into a new folder: the same private modes.
        let merged = dir.path().join("merged/dir/all.sqlite3");
        ok(&keet_umask(umask, dir.path(), &[os("cache"), os("merge"), cache.as_os_str(), os("--into"), merged.as_os_str()]));
        assert_eq!((mode(merged.parent().unwrap()), mode(&merged)), (0o700, 0o600), "umask {umask}: merged cache");

        // Other `-o` outputs too (inspect's report).
        let facts = dir.path().join("facts.json");
        ok(&keet_umask(umask, dir.path(), &[os("inspect"), input().as_os_str(), os("-f"), os("json"), os("-o"), facts.as_os_str()]));
        assert_eq!(mode(&facts), report_mode, "umask {umask}: inspect -o");
    }
}

#[test]
fn a_looser_cache_and_keets_own_folder_are_tightened_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    // keet's own folder (the default cache path under XDG_CACHE_HOME), found 0755 with a 0644 file.
    let own = dir.path().join("keet");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = keet_umask("022", dir.path(), &[os("explain"), input().as_os_str(), os("--no-llm"), os("--top"), os("1")]);
    let stderr = ok(&o);
    assert!(stderr.contains(&format!("note: cache folder {} was mode 0755", own.display())), "{stderr}");
    let cache = own.join("analyses.sqlite3");
    assert_eq!((mode(&own), mode(&cache)), (0o700, 0o600));

    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = keet_umask("022", dir.path(), &[os("history")]);
    let stderr = ok(&o);
    assert!(stderr.contains(&format!("note: cache {} was mode 0644", cache.display())) && stderr.contains("made it 0600"), "{stderr}");
    assert_eq!(mode(&cache), 0o600);
    // Once private, no more notes.
    let stderr = ok(&keet_umask("022", dir.path(), &[os("history")]));
    assert!(!stderr.contains("note:"), "{stderr}");

    // A folder the user names and that exists already is theirs: its mode is left alone.
    let mine = dir.path().join("shared-project");
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let c = mine.join("c.sqlite3");
    ok(&keet_umask(
        "022",
        dir.path(),
        &[os("explain"), input().as_os_str(), os("--no-llm"), os("--top"), os("1"), os("--cache"), c.as_os_str()],
    ));
    assert_eq!((mode(&mine), mode(&c)), (0o755, 0o600));
}

#[test]
fn an_unwritable_cache_is_a_warning_and_the_report_is_still_printed() {
    let dir = tempfile::tempdir().unwrap();
    // A parent that is a regular file: no one can create the folder, root included.
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    let mut cases = vec![(file.join("keet/analyses.sqlite3"), format!("{} is a file, not a folder", file.display()))];
    // A folder the user cannot write (root can write anywhere, so only as another user).
    if unsafe { libc::geteuid() } != 0 {
        let ro = dir.path().join("read-only");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).unwrap();
        cases.push((ro.join("analyses.sqlite3"), "cannot create the file".to_string()));
    } else {
        eprintln!(
            "private_files: running as root; the read-only folder case is skipped (root writes anywhere), the file-as-parent case runs"
        );
    }
    for (cache, why) in cases {
        let o = keet_umask(
            "022",
            dir.path(),
            &[os("explain"), input().as_os_str(), os("--no-llm"), os("--top"), os("2"), os("--cache"), cache.as_os_str()],
        );
        let stderr = ok(&o);
        assert!(stderr.contains(&format!("warning: cache {}", cache.display())) && stderr.contains("without the cache"), "{stderr}");
        assert!(stderr.contains(&why), "says why ({why}): {stderr}");
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains("reduce"), "the report is printed: {stdout}");
        assert!(!cache.exists());
    }
}
