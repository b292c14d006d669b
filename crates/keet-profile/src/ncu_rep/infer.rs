//! Unit inference from a raw metric name, for reports, which store values in ncu's base units
//! but no unit per metric.
//!
//! ncu metric names follow `unit__counter.rollup.submetric` (`dram__bytes.sum.per_second`,
//! `sm__throughput.avg.pct_of_peak_sustained_elapsed`). The counter name says what is counted
//! (`bytes`, `sectors`, `cycles`, `inst`...), the rollup and submetric say how it was combined.
//! Only the cases that are unambiguous in practice are inferred (checked against the units rows
//! of the corpus raw CSV pages); everything else is [`Unit::None`].

use crate::Unit;

/// The normalised unit of a metric value stored in a report, guessed from its raw name.
pub fn unit_for_metric(name: &str) -> Unit {
    // Drop "SM_A.TriageAC." style prefixes: the metric proper is the first segment with "__".
    let mut name = name;
    while let Some((head, rest)) = name.split_once('.') {
        if head.contains("__") {
            break;
        }
        name = rest;
    }
    let mut segs = name.split('.');
    let counter = segs.next().unwrap_or("");
    let rollup = segs.next();
    let sub = segs.next();
    let extra = segs.next();
    let last = name.rsplit('.').next().unwrap_or(name);

    if last.starts_with("pct") || last.ends_with("_pct") {
        return Unit::Percent;
    }
    if counter.starts_with("gpu__time_") {
        return match (sub, extra) {
            (None, _) => Unit::Nanoseconds,
            _ => Unit::None,
        };
    }
    if counter.starts_with("device__") || counter.starts_with("launch__") || counter.starts_with("derived_") {
        return Unit::None;
    }
    if !matches!(rollup, Some("sum" | "avg" | "min" | "max")) || extra.is_some() {
        return Unit::None;
    }
    let base = counted_thing(counter);
    match (sub, base) {
        (None, Some("byte")) => Unit::Bytes,
        (None, Some(b)) => Unit::Count(b.into()),
        (Some("per_second"), Some("byte")) => Unit::BytesPerSecond,
        (Some("per_second"), Some("cycle")) => Unit::Hertz,
        (Some("per_second"), Some(b)) => Unit::PerSecond(b.into()),
        // ncu reports `*warps_active.avg.per_cycle_active` in warps.
        (Some(s), Some("warp")) if s.starts_with("per_cycle") => Unit::Count("warp".into()),
        (Some(s), Some(b)) if s.starts_with("per_cycle") || s == "peak_sustained" => {
            if matches!(b, "byte" | "sector" | "inst") {
                Unit::Other(format!("{b}/cycle").into())
            } else {
                Unit::None
            }
        }
        _ => Unit::None,
    }
}

/// What a counter counts, from the words of its name (`lts__t_sectors_srcunit_tex` -> sector).
fn counted_thing(counter: &str) -> Option<&'static str> {
    let body = counter.split_once("__").map(|(_, b)| b).unwrap_or(counter);
    if body.contains("branch") {
        return None;
    }
    for word in body.split('_') {
        let thing = match word {
            "bytes" => "byte",
            "sectors" => "sector",
            "cycles" => "cycle",
            "inst" | "insts" | "instructions" => "inst",
            "warps" => "warp",
            "threads" => "thread",
            "ctas" => "block",
            _ => continue,
        };
        return Some(thing);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_common_units() {
        assert_eq!(unit_for_metric("sm__throughput.avg.pct_of_peak_sustained_elapsed"), Unit::Percent);
        assert_eq!(unit_for_metric("smsp__sass_average_branch_targets_threads_uniform.pct"), Unit::Percent);
        assert_eq!(unit_for_metric("derived__smsp__inst_executed_op_branch_pct"), Unit::Percent);
        assert_eq!(unit_for_metric("sm__maximum_warps_per_active_cycle_pct"), Unit::Percent);
        assert_eq!(unit_for_metric("derived__pct_occupancy_per_block_size"), Unit::None);
        assert_eq!(unit_for_metric("gpu__time_duration.sum"), Unit::Nanoseconds);
        assert_eq!(unit_for_metric("dram__bytes.sum"), Unit::Bytes);
        assert_eq!(unit_for_metric("dram__bytes.sum.per_second"), Unit::BytesPerSecond);
        assert_eq!(unit_for_metric("dram__cycles_elapsed.avg.per_second"), Unit::Hertz);
        assert_eq!(unit_for_metric("lts__t_sectors_srcunit_tex.sum"), Unit::Count("sector".into()));
        assert_eq!(unit_for_metric("lts__t_sectors.sum.per_second"), Unit::PerSecond("sector".into()));
        assert_eq!(unit_for_metric("smsp__inst_executed.sum"), Unit::Count("inst".into()));
        assert_eq!(unit_for_metric("sm__warps_active.avg.per_cycle_active"), Unit::Count("warp".into()));
        assert_eq!(unit_for_metric("sm__inst_executed.avg.per_cycle_active"), Unit::Other("inst/cycle".into()));
        assert_eq!(unit_for_metric("SM_A.TriageAC.sm__cycles_active.avg"), Unit::Count("cycle".into()));
        assert_eq!(unit_for_metric("device__attribute_l2_cache_size"), Unit::None);
        assert_eq!(unit_for_metric("launch__grid_size"), Unit::None);
        assert_eq!(unit_for_metric("smsp__sass_branch_targets_threads_divergent.sum"), Unit::None);
        assert_eq!(unit_for_metric("inst_executed"), Unit::None);
    }
}
