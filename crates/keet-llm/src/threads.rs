//! CPU thread count for the model.
//!
//! candle's CPU pool busy-waits between operations, so a worker thread that has to share its core
//! with another busy process slows every step down badly (measured: 2 threads on 2 cores with one
//! other busy process fell from 27 to 2.4 tok/s, while 1 thread kept 18). keet therefore defaults to
//! **the cores it may use minus one, further reduced by the other load on the machine (the 1-minute
//! load average, rounded up), at least 1 and at most 16**. `--threads N` or `KEET_THREADS=N`
//! override it. The choice must be made before candle's first CPU operation (its pools read
//! `RAYON_NUM_THREADS` / `CANDLE_NUM_THREADS` once).

use std::sync::OnceLock;

static CHOSEN: OnceLock<usize> = OnceLock::new();

/// Cores this process may run on (cgroup / affinity aware).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// The 1-minute load average, if readable.
pub fn load_average() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// The default thread count (see the module docs).
pub fn default_threads() -> usize {
    let cores = available_cores();
    let busy = load_average().map(|l| l.ceil() as usize).unwrap_or(0);
    let free = cores.saturating_sub(busy);
    cores.saturating_sub(1).min(free).clamp(1, 16)
}

/// Fixes the thread count for this process: explicit, else `KEET_THREADS`, else the default.
/// Returns the count in force (the first call wins; later calls report it).
pub fn configure(explicit: Option<usize>) -> usize {
    *CHOSEN.get_or_init(|| {
        let n = explicit
            .filter(|&n| n > 0)
            .or_else(|| std::env::var("KEET_THREADS").ok().and_then(|v| v.trim().parse().ok()).filter(|&n: &usize| n > 0))
            .unwrap_or_else(default_threads);
        // candle reads these once, when its pools start.
        std::env::set_var("CANDLE_NUM_THREADS", n.to_string());
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
        n
    })
}

/// The configured count, if [`configure`] ran.
pub fn configured() -> Option<usize> {
    CHOSEN.get().copied()
}
