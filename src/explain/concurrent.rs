//! The model's part of `keet explain` for the kernels that need it: one after another on the engine,
//! or with `--concurrency N` up to N kernels at a time, each on a thread whose requests the engine
//! decodes together with the others' (`keet_llm::SharedEngine`: one forward pass steps every
//! outstanding answer). Each kernel's answer is exactly what it gets alone (the batched decoder is
//! bit for bit the single one), so the report does not depend on N; only the time does.

use super::answer::answer_kernel;
use super::ask::Asking;
use super::code::Located;
use super::report::{CachedFindings, KernelGroup, SourceLine};
use super::{ExplainError, ExplainOptions, RunStats};
use crate::analysis::LaunchAnalysis;
use crate::llm::{Engine, Generate, SharedEngine};
use crate::profile::Launch;
use std::sync::Mutex;
use std::time::Instant;

/// One kernel the model is asked about.
pub(super) struct ModelJob<'a> {
    /// 0-based rank among the chosen kernels (for progress lines).
    pub rank: usize,
    pub launch: &'a Launch,
    pub la: &'a LaunchAnalysis,
    pub group: &'a KernelGroup,
    pub lines: &'a [SourceLine],
    /// The kernel's code, when keet found it: the model is then asked for one edit.
    pub located: Option<&'a Located>,
}

/// Asks the model about every job, `concurrency` at a time, and gives the engine back with the
/// answers in job order. `of`: the number of chosen kernels (for progress lines).
pub(super) fn answer_all(
    engine: Engine,
    jobs: &[ModelJob<'_>],
    of: usize,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<(Engine, Vec<CachedFindings>), ExplainError> {
    let mut engine = engine;
    let slots = opts.run.concurrency.clamp(1, jobs.len().max(1));
    if slots == 1 {
        let answers = jobs.iter().map(|job| answer_one(&mut engine, job, of, opts, stats)).collect::<Result<Vec<_>, _>>()?;
        return Ok((engine, answers));
    }
    let shared = SharedEngine::start(engine, slots)?;
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<Result<CachedFindings, ExplainError>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let thread_stats: Mutex<Vec<RunStats>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..slots {
            let mut handle = shared.handle();
            let (next, results, thread_stats) = (&next, &results, &thread_stats);
            scope.spawn(move || {
                let mut mine = RunStats::default();
                loop {
                    let at = {
                        let mut n = next.lock().unwrap_or_else(|p| p.into_inner());
                        *n += 1;
                        *n - 1
                    };
                    let Some(job) = jobs.get(at) else { break };
                    let answer = answer_one(&mut handle, job, of, opts, &mut mine);
                    let failed = answer.is_err();
                    results.lock().unwrap_or_else(|p| p.into_inner())[at] = Some(answer);
                    if failed {
                        break;
                    }
                }
                thread_stats.lock().unwrap_or_else(|p| p.into_inner()).push(mine);
            });
        }
    });
    let engine = shared.stop()?;
    for s in thread_stats.into_inner().unwrap_or_else(|p| p.into_inner()) {
        stats.absorb(&s);
    }
    let mut answers = Vec::with_capacity(jobs.len());
    for (at, r) in results.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().enumerate() {
        // A job left unanswered follows a failed one: its thread stopped at the error.
        answers.push(r.unwrap_or_else(|| Err(ExplainError::Io(format!("kernel {} was not asked: an earlier one failed", at + 1))))?);
    }
    Ok((engine, answers))
}

/// The model's findings for one kernel, and its edit when keet has the kernel's code.
fn answer_one(
    engine: &mut dyn Generate,
    job: &ModelJob<'_>,
    of: usize,
    opts: &ExplainOptions,
    stats: &mut RunStats,
) -> Result<CachedFindings, ExplainError> {
    let started = Instant::now();
    if opts.run.progress {
        eprintln!("keet: [{}/{of}] asking about {} ...", job.rank + 1, trunc_name(&job.group.name, 60));
    }
    let mut asking = Asking { engine, launch: job.launch, la: job.la, group: job.group, lines: job.lines, opts, stats };
    let found = answer_kernel(&mut asking, job.located)?;
    stats.generate_s += started.elapsed().as_secs_f64();
    if opts.run.progress {
        eprintln!("keet: [{}/{of}] done in {:.1} s", job.rank + 1, started.elapsed().as_secs_f64());
    }
    stats.kernels_asked += 1;
    Ok(found)
}

/// A kernel name cut to `max` characters for a progress line.
fn trunc_name(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        format!("{}...", name.chars().take(max).collect::<String>())
    }
}
