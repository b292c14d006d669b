//! The launch's regime and its bounds: which units are busy ([`utilisation`]) and what the launch
//! waits on ([`classify`]): throughput-bound on a unit, latency-bound, grid- or launch-bound. The
//! thresholds are in [`super::thresholds`]. [`derive_facts`] is the one way from a launch to its
//! facts with the regime decided.

use super::thresholds::{GRID_FEW_WAVES, SOL_BUSY_PCT, SOL_LOW_PCT, TINY_LAUNCH_NS};
pub use crate::facts::{Bound, BoundKind};
use crate::facts::{Fact, FactKey, Facts};
use crate::profile::Launch;

/// Every fact of one launch ([`crate::facts::measure`]) with its regime ([`Facts::bound`]).
pub fn derive_facts(launch: &Launch) -> Facts {
    let mut f = crate::facts::measure(launch);
    f.bound = classify(&f);
    f
}

/// Speed-of-light classification: the launch's regime.
///
/// Uses elapsed-based percentages only (an artefact above 100% never enters), each unit capped at 100%.
/// Order of decision: a launch of a few microseconds that does not fill one wave (fewer blocks than
/// SMs, or under one wave) is launch-bound; otherwise a grid with fewer blocks than SMs, or under
/// half a wave ([`GRID_FEW_WAVES`]), at low throughput is grid-bound; a busiest unit under
/// the busy threshold means latency-bound; else throughput-bound on the busiest unit (SM or a memory unit).
pub fn classify(f: &Facts) -> Option<Bound> {
    let units = utilisation(f);
    let duration = f.duration_ns.as_ref().map(|d| d.value);
    if units.is_empty() && duration.is_none() {
        return None;
    }
    let busiest = units.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
    let top = busiest.map(|b| b.1).unwrap_or(0.0);
    let mut because: Vec<FactKey> = units.iter().map(|u| u.2).collect();
    let grid_short = match (&f.grid_blocks, &f.sm_count) {
        (Some(g), Some(s)) => Some(g.value < s.value),
        _ => None,
    };
    let waves = f.waves_per_sm.as_ref().map(|w| w.value);
    // Fewer blocks than SMs, or fewer blocks than fit in one wave (a block on every SM but slots to spare).
    let under_a_wave = match (grid_short, waves) {
        (Some(true), _) => Some(true),
        (_, Some(w)) => Some(w < 1.0),
        (short, None) => short,
    };
    let grid_too_small = grid_short == Some(true) || waves.is_some_and(|w| w < GRID_FEW_WAVES);
    let mk = |kind, because: Vec<FactKey>| Bound { kind, busiest_unit: busiest.map(|b| b.0), busiest_pct: busiest.map(|b| b.1), because };
    if let Some(d) = duration {
        if d < TINY_LAUNCH_NS && top < SOL_BUSY_PCT && under_a_wave != Some(false) {
            because.push(FactKey::DurationNs);
            if grid_short.is_some() {
                because.extend([FactKey::GridBlocks, FactKey::SmCount]);
            }
            return Some(mk(BoundKind::Launch, because));
        }
    }
    if units.is_empty() {
        return None;
    }
    if top < SOL_LOW_PCT && grid_too_small {
        if grid_short.is_some() {
            because.extend([FactKey::GridBlocks, FactKey::SmCount]);
        }
        if grid_short != Some(true) {
            because.push(FactKey::WavesPerSm);
        }
        return Some(mk(BoundKind::GridTooSmall, because));
    }
    if top < SOL_BUSY_PCT {
        return Some(mk(BoundKind::Latency, because));
    }
    let kind = if busiest.is_some_and(|b| b.0 == "SM") { BoundKind::Compute } else { BoundKind::Memory };
    Some(mk(kind, because))
}

/// The measured units and their elapsed-based utilisation, % of peak capped at 100: `(unit, pct, fact key)`.
/// "memory" (ncu's combined memory throughput) stands in only when no single memory unit was measured,
/// or when it is higher than every one measured (it is the busiest of its memory units).
pub fn utilisation(f: &Facts) -> Vec<(&'static str, f64, FactKey)> {
    let elapsed = |x: &Fact| x.evidence.iter().all(|e| !e.metric.contains("sustained_active"));
    let mut v: Vec<(&'static str, f64, FactKey)> =
        [(&f.sm_throughput_pct, "SM"), (&f.dram_throughput_pct, "DRAM"), (&f.l2_throughput_pct, "L2"), (&f.l1_throughput_pct, "L1/TEX")]
            .into_iter()
            .filter_map(|(x, n)| x.as_ref().filter(|x| elapsed(x)).map(|x| (n, x.value.min(100.0), x.key)))
            .collect();
    if !v.iter().any(|u| u.0 != "SM") {
        if let Some(m) = f.memory_throughput_pct.as_ref().filter(|x| elapsed(x)) {
            v.push(("memory", m.value.min(100.0), m.key));
        }
    } else if let Some(m) = f.memory_throughput_pct.as_ref().filter(|x| elapsed(x)) {
        if v.iter().filter(|u| u.0 != "SM").all(|u| u.1 < m.value.min(100.0) - 0.5) {
            v.push(("memory", m.value.min(100.0), m.key));
        }
    }
    v
}

/// The busiest memory unit measured (L1/TEX, L2, DRAM or ncu's combined memory throughput).
pub fn busiest_memory(f: &Facts) -> Option<(&'static str, f64, FactKey)> {
    utilisation(f).into_iter().filter(|u| u.0 != "SM").max_by(|a, b| a.1.total_cmp(&b.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::tests::launch;

    fn derive(l: &Launch) -> Facts {
        derive_facts(l)
    }

    #[test]
    fn memory_bound_names_busiest_unit() {
        let l = launch(&[
            ("gpu__time_duration.sum", 5.0, "usecond"),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 20.0, "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 91.0, "%"),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 91.0, "%"),
            ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 40.0, "%"),
        ]);
        let f = derive(&l);
        assert_eq!(f.duration_ns.as_ref().unwrap().value, 5000.0);
        let b = f.bound.unwrap();
        assert_eq!(b.kind, BoundKind::Memory);
        assert_eq!(b.busiest_unit, Some("DRAM"));
    }

    #[test]
    fn small_grid_and_latency() {
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 2.0, "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 1.0, "%"),
            ("launch__grid_size", 1.0, ""),
            ("launch__sm_count", 28.0, ""),
        ]);
        assert_eq!(derive(&l).bound.unwrap().kind, BoundKind::GridTooSmall);
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 30.0, "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 40.0, "%"),
            ("launch__grid_size", 1000.0, ""),
            ("launch__sm_count", 28.0, ""),
        ]);
        assert_eq!(derive(&l).bound.unwrap().kind, BoundKind::Latency);
    }

    #[test]
    fn dram_table_alone_is_memory_bound_on_dram() {
        let l =
            launch(&[("gpu__time_duration.sum", 206_080.0, "nsecond"), ("dram__bytes_read.sum.pct_of_peak_sustained_elapsed", 66.26, "%")]);
        let b = derive(&l).bound.unwrap();
        assert_eq!((b.kind, b.busiest_unit), (BoundKind::Memory, Some("DRAM")));
    }

    #[test]
    fn unified_memory_is_not_latency_bound_because_dram_reads_zero() {
        // A Jetson-like report: DRAM counters 0, L2 busy, SM low.
        let l = launch(&[
            ("gpu__time_duration.sum", 400.0, "usecond"),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.0, "%"),
            ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 78.0, "%"),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 0.0, "%"),
            ("dram__bytes_read.sum", 0.0, "byte"),
            ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 78.0, "%"),
            ("device__attribute_integrated", 1.0, ""),
        ]);
        let f = derive(&l);
        assert!(f.dram_throughput_pct.is_none(), "DRAM at 0 on unified memory is no measurement");
        assert!(f.artifacts.iter().any(|a| a.reason.contains("unified memory")));
        assert!(f.roofline.dram_bytes.is_none(), "the DRAM byte counters read 0 too");
        let b = f.bound.unwrap();
        assert_eq!((b.kind, b.busiest_unit), (BoundKind::Memory, Some("L2")));
        // Without the integrated flag, zero DRAM bytes while L2 moves data says the same.
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.0, "%"),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 0.0, "%"),
            ("lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 71.0, "%"),
            ("lts__t_sectors.sum", 1e8, "sector"),
        ]);
        let b = derive(&l).bound.unwrap();
        assert_eq!((b.kind, b.busiest_unit), (BoundKind::Memory, Some("L2")));
        // A discrete GPU whose data stays in L2 keeps its measured DRAM.
        let l = launch(&[
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.0, "%"),
            ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 0.1, "%"),
            ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 30.0, "%"),
        ]);
        assert!(derive(&l).dram_throughput_pct.is_some());
    }
}
