//! `keet bench batch`: files/s and peak memory of `keet explain --no-llm` over batches of
//! different sizes, side by side, each batch with the sets found (the default) and without
//! (`--no-sets`), the two in alternating order. Each batch is a temporary directory of symlinks to the corpus
//! profiles (never copies), explained by a child keet process whose peak RSS comes from `wait4`.

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct BatchBenchArgs {
    /// Batch sizes (number of profile files), e.g. `200 10000`.
    #[arg(default_values_t = [200usize, 10_000])]
    pub sizes: Vec<usize>,
    /// Profiles to repeat (default: ../shared/corpus).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Threads for parsing (`--jobs` of the child; 0 = all cores).
    #[arg(long, short = 'j', default_value_t = 0)]
    pub jobs: usize,
    /// Report format the child writes (to a file in the temporary directory).
    #[arg(long, default_value = "json")]
    pub format: String,
}

/// One child run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BatchRun {
    pub files: usize,
    /// Whether the child looked for sets (`--no-sets` when not).
    pub sets: bool,
    pub seconds: f64,
    pub files_per_s: f64,
    pub peak_rss_mb: f64,
    pub exit_code: i32,
}

/// Runs `exe explain DIR --no-llm --no-cache` (with `--no-sets` unless `sets`) as a child and
/// returns its time and peak RSS.
pub fn run_child(exe: &Path, dir: &Path, jobs: usize, format: &str, sets: bool) -> anyhow::Result<(f64, f64, i32)> {
    let out = dir.join("report.out");
    let t = Instant::now();
    let child = std::process::Command::new(exe)
        .arg("explain")
        .arg(dir.join("profiles"))
        .args(["--no-llm", "--no-cache", "--top", "20", "--jobs", &jobs.to_string(), "--format", format, "-o"])
        .arg(&out)
        .args((!sets).then_some("--no-sets"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: plain syscall on our own child; both pointers are to live locals.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let secs = t.elapsed().as_secs_f64();
    if r != pid {
        anyhow::bail!("waiting for the child: {}", std::io::Error::last_os_error());
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    // ru_maxrss is in KiB on Linux.
    Ok((secs, ru.ru_maxrss as f64 / 1024.0, code))
}

/// Makes `n` symlinks (cycling through `profiles`) under `dir/profiles`.
pub fn make_batch(dir: &Path, profiles: &[PathBuf], n: usize) -> anyhow::Result<()> {
    let root = dir.join("profiles");
    for i in 0..n {
        let src = &profiles[i % profiles.len()];
        // 500 per subdirectory keeps directories small; names keep the extension.
        let sub = root.join(format!("{:03}", i / 500));
        if i % 500 == 0 {
            std::fs::create_dir_all(&sub)?;
        }
        let name = format!("{i:06}-{}", src.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
        std::os::unix::fs::symlink(src, sub.join(name)).with_context(|| format!("linking {}", src.display()))?;
    }
    Ok(())
}

pub fn run(a: BatchBenchArgs) -> anyhow::Result<i32> {
    let corpus = a.corpus.clone().unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"));
    let corpus = std::fs::canonicalize(&corpus).with_context(|| format!("corpus {}", corpus.display()))?;
    let profiles = crate::profile::expand_inputs(std::slice::from_ref(&corpus)).with_context(|| format!("listing {}", corpus.display()))?;
    if profiles.is_empty() {
        anyhow::bail!("{}: no .ncu-rep or .csv profiles", corpus.display());
    }
    let exe = std::env::current_exe().context("finding the keet executable")?;
    println!(
        "keet explain --no-llm --no-cache --format {} over N symlinks to the {} profiles of {}",
        a.format,
        profiles.len(),
        corpus.display()
    );
    println!("{:>8}  {:>5}  {:>9}  {:>9}  {:>13}  {:>4}", "files", "sets", "seconds", "files/s", "peak RSS MiB", "exit");
    let mut runs = Vec::new();
    for (round, &n) in a.sizes.iter().enumerate() {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        make_batch(dir.path(), &profiles, n)?;
        // Alternate which goes first, so neither always meets the colder page cache.
        let order = if round % 2 == 0 { [true, false] } else { [false, true] };
        for sets in order {
            let (secs, rss, code) = run_child(&exe, dir.path(), a.jobs, &a.format, sets)?;
            let run = BatchRun { files: n, sets, seconds: secs, files_per_s: n as f64 / secs.max(1e-9), peak_rss_mb: rss, exit_code: code };
            let shown = if sets { "yes" } else { "no" };
            println!(
                "{:>8}  {:>5}  {:>9.2}  {:>9.1}  {:>13.1}  {:>4}",
                run.files, shown, run.seconds, run.files_per_s, run.peak_rss_mb, run.exit_code
            );
            runs.push(run);
        }
    }
    for sets in [true, false] {
        let mine: Vec<&BatchRun> = runs.iter().filter(|r| r.sets == sets).collect();
        if let [first, .., last] = mine.as_slice() {
            let ratio = last.peak_rss_mb / first.peak_rss_mb.max(1e-9);
            let with = if sets { "with sets" } else { "without sets" };
            println!("peak RSS {} files / {} files, {with}: {ratio:.2}x", last.files, first.files);
        }
    }
    // Exit 2 from the child only means the corpus has files that are not profiles (reported).
    Ok(if runs.iter().all(|r| r.exit_code == 0 || r.exit_code == 2) { 0 } else { 1 })
}
