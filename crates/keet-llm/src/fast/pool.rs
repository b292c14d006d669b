//! A small persistent thread pool for data-parallel loops, built for a shared, small CPU.
//!
//! * The calling thread always takes part, so `threads = 1` means no worker threads at all.
//! * Work is split into chunks claimed from an atomic counter: if a worker is descheduled
//!   (another process on the node), the caller simply takes the remaining chunks instead of
//!   waiting for a fixed share.
//! * Idle workers spin only briefly (long enough to bridge the gaps between the matmuls of one
//!   forward pass) and then park on a condition variable, so an idle or lightly used pool costs
//!   no CPU and does not fight other processes for the cores.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it parks.
const SPIN: Duration = Duration::from_micros(300);

/// One parallel loop, living on the caller's stack for the duration of [`Pool::run`].
struct Job {
    /// Lifetime-erased pointer to the loop body; only dereferenced while `Pool::run` waits.
    f: *const (dyn Fn(usize) + Sync),
    n: usize,
    next: AtomicUsize,
}

struct Shared {
    epoch: AtomicU64,
    job: AtomicPtr<Job>,
    closed: AtomicBool,
    in_flight: AtomicUsize,
    sleepers: AtomicUsize,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises `run` calls (the pool is used from one thread at a time, but `Pool` is `Sync`).
    busy: Mutex<()>,
}

impl Pool {
    /// A pool where `threads` threads (the caller included) work on each loop.
    pub fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            closed: AtomicBool::new(true),
            in_flight: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        });
        let workers = (1..threads.max(1))
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new().name(format!("keet-fast-{i}")).spawn(move || worker(&s)).expect("spawn worker thread")
            })
            .collect();
        Pool { shared, workers, busy: Mutex::new(()) }
    }

    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Calls `f(i)` for every `i in 0..n`, spread over the pool; returns when all calls are done.
    pub fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        if n == 0 {
            return;
        }
        if self.workers.is_empty() || n == 1 {
            (0..n).for_each(f);
            return;
        }
        let _busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY (lifetime erasure): the pointer is only dereferenced by workers that registered in
        // `in_flight` while `closed` was false; this function sets `closed` and then waits until
        // `in_flight` is zero before returning, so no worker touches `f` or `job` after it returns.
        let f_static: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
        let job = Job { f: f_static, n, next: AtomicUsize::new(0) };
        s.job.store(&job as *const Job as *mut Job, SeqCst);
        s.closed.store(false, SeqCst);
        s.epoch.fetch_add(1, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.cv.notify_all();
        }
        loop {
            let i = job.next.fetch_add(1, SeqCst);
            if i >= n {
                break;
            }
            f(i);
        }
        s.closed.store(true, SeqCst);
        let mut spins = 0u32;
        while s.in_flight.load(SeqCst) != 0 {
            spins += 1;
            if spins < 4096 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        s.job.store(std::ptr::null_mut(), SeqCst);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        {
            let _g = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.cv.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn worker(s: &Shared) {
    let mut seen = s.epoch.load(SeqCst);
    loop {
        // Wait for a new epoch: spin briefly, then park.
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if s.shutdown.load(SeqCst) {
                return;
            }
            if s.epoch.load(SeqCst) != seen {
                break;
            }
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 && start.elapsed() > SPIN {
                s.sleepers.fetch_add(1, SeqCst);
                let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                while s.epoch.load(SeqCst) == seen && !s.shutdown.load(SeqCst) {
                    g = s.cv.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                drop(g);
                s.sleepers.fetch_sub(1, SeqCst);
                continue;
            }
            std::hint::spin_loop();
        }
        let e = s.epoch.load(SeqCst);
        seen = e;
        s.in_flight.fetch_add(1, SeqCst);
        if !s.closed.load(SeqCst) && s.epoch.load(SeqCst) == e {
            let p = s.job.load(SeqCst);
            if !p.is_null() {
                // SAFETY: we are registered in `in_flight` and saw `closed == false` after
                // registering, so `Pool::run` is still waiting and `*p` (on its stack) is alive.
                let job = unsafe { &*p };
                loop {
                    let i = job.next.fetch_add(1, SeqCst);
                    if i >= job.n {
                        break;
                    }
                    // SAFETY: same as above: the closure outlives this call.
                    unsafe { (*job.f)(i) };
                }
            }
        }
        s.in_flight.fetch_sub(1, SeqCst);
    }
}

/// A raw pointer that may be shared between the threads of one [`Pool::run`] call.
/// Users must only write disjoint parts through it.
#[derive(Clone, Copy)]
pub struct SyncPtr<T>(pub *mut T);
// SAFETY: the pointer is only used for disjoint writes within one `Pool::run`, which joins all
// threads before the pointee can be used again (documented contract of this type).
unsafe impl<T> Send for SyncPtr<T> {}
// SAFETY: see `Send`.
unsafe impl<T> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    pub fn new(s: &mut [T]) -> Self {
        SyncPtr(s.as_mut_ptr())
    }
    /// # Safety
    /// `off..off + len` must be in bounds of the original slice, and no other thread may access
    /// that range during the lifetime of the returned slice.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice(&self, off: usize, len: usize) -> &mut [T] {
        std::slice::from_raw_parts_mut(self.0.add(off), len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_runs_every_index_once() {
        for threads in [1, 2, 3] {
            let pool = Pool::new(threads);
            for round in 0..200 {
                let n = round % 37;
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                pool.run(n, &|i| {
                    hits[i].fetch_add(1, SeqCst);
                });
                assert!(hits.iter().all(|h| h.load(SeqCst) == 1));
                if round % 50 == 0 {
                    std::thread::sleep(Duration::from_millis(2)); // let workers park
                }
            }
        }
    }
}
