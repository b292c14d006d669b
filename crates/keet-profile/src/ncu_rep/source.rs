//! Source-level counters from a report: the per-instruction values behind ncu's source page.
//!
//! A report keeps them as *instance values* of ordinary metric results (`inst_executed`,
//! `thread_inst_executed`, `smsp__pcsamp_warps_issue_stalled_*`...), keyed by the SASS address
//! (PC) of each instruction that has data. Newer reports also list, in the `SourceCounters`
//! section, which metrics the source view shows and under which column label; older ones do not,
//! and a built-in list with ncu's labels is used instead.
//!
//! The SASS text itself is not in the report (ncu disassembles the embedded cubin on demand), so
//! rows carry the address and counter values only, with empty text. Instructions without any
//! recorded instance (never executed, never sampled) have no row; within a row, a counter with no
//! instance for that address is 0, as on ncu's source page.

use super::proto::{self, MetricValueKind};
use crate::{MetricValue, Metrics, SourceRow, SourceView};
use prost::bytes::Bytes;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

const STALL_PREFIX: &str = "smsp__pcsamp_warps_issue_stalled_";
const ALL_SAMPLES: (&str, &str) = ("group:smsp__pcsamp_warp_stall_reasons", "Warp Stall Sampling (All Samples)");
const NOT_ISSUED: (&str, &str) = ("group:smsp__pcsamp_warp_stall_reasons_not_issued", "Warp Stall Sampling (Not-issued Samples)");

/// Per-instruction metrics and their source-page labels, for reports that do not list them.
const KNOWN: &[(&str, &str)] = &[
    ("smsp__pcsamp_sample_count", "# Samples"),
    ("inst_executed", "Instructions Executed"),
    ("thread_inst_executed", "Thread Instructions Executed"),
    ("thread_inst_executed_true", "Predicated-On Thread Instructions Executed"),
    ("derived__avg_thread_executed", "Avg. Threads Executed"),
    ("derived__avg_thread_executed_true", "Avg. Predicated-On Threads Executed"),
    ("derived__avg_thread_unexecuted_true", "Avg. Predicated-On Threads Unexecuted"),
    ("smsp__branch_targets_threads_divergent", "Divergent Branches"),
];

/// Per-instruction attributes rather than counters: enum codes ncu shows as words ("Global",
/// "Store") or an access size that is "-" on non-memory instructions. Left out.
const NOT_COUNTERS: &[&str] =
    &["memory_type", "memory_access_type", "memory_access_size_type", "smsp__sass_inst_executed_memdesc_explicit_evict_type"];

/// Whether `name` may hold per-instruction values worth decoding.
pub(super) fn is_source_metric(name: &str, listed: &HashSet<&[u8]>) -> bool {
    if NOT_COUNTERS.contains(&name) {
        return false;
    }
    name.starts_with(STALL_PREFIX) || listed.contains(name.as_bytes()) || KNOWN.iter().any(|(n, _)| *n == name)
}

/// The instance values of an encoded metric result, keyed by PC; `None` when it has none or its
/// instance keys are not addresses.
pub(super) fn instances_by_pc(raw: &Bytes) -> Option<BTreeMap<u64, f64>> {
    let m = proto::ProfileMetricInstances::decode(raw.clone()).ok()?;
    let mut out = BTreeMap::new();
    for i in m.instances {
        let pc = match i.key?.kind? {
            MetricValueKind::Uint64(k) => k,
            MetricValueKind::Uint32(k) => k as u64,
            _ => return None,
        };
        let v = match i.value.and_then(|v| v.kind) {
            Some(MetricValueKind::Double(v)) => v,
            Some(MetricValueKind::Float(v)) => v.to_string().parse().unwrap_or(v as f64),
            Some(MetricValueKind::Uint32(v)) => v as f64,
            Some(MetricValueKind::Uint64(v)) => v as f64,
            Some(MetricValueKind::String(_)) | None => continue,
        };
        out.insert(pc, v);
    }
    (!out.is_empty()).then_some(out)
}

/// The first instance value of a metric, as an unsigned integer (`launch__function_pcs`: the
/// kernel's first PC).
pub(super) fn first_instance_u64(raw: &Bytes) -> Option<u64> {
    let m = proto::ProfileMetricInstances::decode(raw.clone()).ok()?;
    match m.instances.into_iter().next()?.value?.kind? {
        MetricValueKind::Uint64(v) => Some(v),
        MetricValueKind::Uint32(v) => Some(v.into()),
        _ => None,
    }
}

/// Sum, per PC, of the metrics a `group:` column stands for. The report stores the members as
/// the group metric's text value ("a,b,c"); without it, the two warp-stall sampling groups are
/// known by name.
fn group(name: &str, per_pc: &[(String, BTreeMap<u64, f64>)], metrics: &Metrics) -> Option<BTreeMap<u64, f64>> {
    let members: HashSet<&str> = match metrics.get(name).map(|m| m.value) {
        Some(MetricValue::Text(list)) => list.split(',').map(str::trim).collect(),
        _ => HashSet::new(),
    };
    let is_member = |n: &str| -> bool {
        if !members.is_empty() {
            return members.contains(&n);
        }
        let not_issued = match name {
            x if x == ALL_SAMPLES.0 => false,
            x if x == NOT_ISSUED.0 => true,
            _ => return false,
        };
        n.starts_with(STALL_PREFIX) && n.ends_with("_not_issued") == not_issued
    };
    let mut sum: BTreeMap<u64, f64> = BTreeMap::new();
    for (n, values) in per_pc {
        if is_member(n) {
            for (pc, v) in values {
                *sum.entry(*pc).or_default() += v;
            }
        }
    }
    (!sum.is_empty()).then_some(sum)
}

/// The most source-view columns read from a report's section list (real ones have ~70).
pub(super) const MAX_COLUMNS: usize = 256;

/// The most values a launch's source view may hold (rows x columns): ~10^5 instructions with
/// ~80 counters each, far above real kernels.
pub(super) const MAX_CELLS: usize = 8_000_000;

/// Builds the SASS view from the per-PC values of one launch: `Ok(None)` when there is no data,
/// `Err(cells)` when it would hold more than [`MAX_CELLS`] values.
pub(super) fn view(
    listed: &[(&[u8], &[u8])],
    per_pc: Vec<(String, BTreeMap<u64, f64>)>,
    metrics: &Metrics,
) -> Result<Option<SourceView>, usize> {
    view_capped(listed, per_pc, metrics, MAX_CELLS)
}

fn view_capped(
    listed: &[(&[u8], &[u8])],
    per_pc: Vec<(String, BTreeMap<u64, f64>)>,
    metrics: &Metrics,
    max_cells: usize,
) -> Result<Option<SourceView>, usize> {
    if per_pc.is_empty() {
        return Ok(None);
    }
    let wanted: Vec<(String, String)> = if listed.is_empty() {
        [ALL_SAMPLES, NOT_ISSUED].iter().chain(KNOWN).map(|(n, l)| (n.to_string(), l.to_string())).collect()
    } else {
        listed
            .iter()
            .map(|(n, l)| {
                let n = String::from_utf8_lossy(n).into_owned();
                let l = if l.is_empty() { n.clone() } else { String::from_utf8_lossy(l).into_owned() };
                (n, l)
            })
            .collect()
    };
    let by_name: HashMap<&str, &BTreeMap<u64, f64>> = per_pc.iter().map(|(n, v)| (n.as_str(), v)).collect();
    let mut columns: Vec<(String, BTreeMap<u64, f64>)> = Vec::new();
    for (name, label) in wanted {
        let values =
            if name.starts_with("group:") { group(&name, &per_pc, metrics) } else { by_name.get(name.as_str()).map(|v| (*v).clone()) };
        if let Some(v) = values {
            columns.push((label, v));
        }
    }
    // Reports that do not list their source metrics: individual stall reasons are kept under
    // their raw names when any instruction has a sample for them.
    let mut reasons: Vec<&(String, BTreeMap<u64, f64>)> =
        per_pc.iter().filter(|(n, v)| listed.is_empty() && n.starts_with(STALL_PREFIX) && v.values().any(|x| *x != 0.0)).collect();
    reasons.sort_by(|a, b| a.0.cmp(&b.0));
    for (n, v) in reasons {
        if !columns.iter().any(|(l, _)| l == n) {
            columns.push((n.clone(), v.clone()));
        }
    }
    if columns.is_empty() {
        return Ok(None);
    }
    let pcs: BTreeSet<u64> = columns.iter().flat_map(|(_, v)| v.keys().copied()).collect();
    // Rows x columns can grow faster than the input (disjoint PCs per metric): refuse the view
    // rather than allocate without bound for a hostile or corrupt file.
    let cells = pcs.len().saturating_mul(columns.len());
    if cells > max_cells {
        return Err(cells);
    }
    let rows = pcs
        .into_iter()
        .map(|pc| SourceRow {
            file: None,
            line: None,
            address: Some(format!("{pc:#x}")),
            text: String::new(),
            // ncu stores no instance where a counter is zero; its source page shows 0 there.
            values: columns.iter().map(|(_, v)| Some(v.get(&pc).copied().unwrap_or(0.0))).collect(),
        })
        .collect();
    Ok(Some(SourceView { view: "sass".into(), columns: columns.into_iter().map(|(l, _)| l).collect(), rows }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcs(pairs: &[(u64, f64)]) -> BTreeMap<u64, f64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn listed_columns_groups_and_zero_fill() {
        let listed: Vec<(&[u8], &[u8])> = vec![
            (b"group:smsp__pcsamp_warp_stall_reasons", b"Warp Stall Sampling (All Samples)"),
            (b"inst_executed", b"Instructions Executed"),
            (b"not_collected", b"Missing"),
        ];
        let per_pc = vec![
            ("inst_executed".to_string(), pcs(&[(0x10, 4.0), (0x20, 2.0)])),
            ("smsp__pcsamp_warps_issue_stalled_wait".to_string(), pcs(&[(0x20, 3.0)])),
            ("smsp__pcsamp_warps_issue_stalled_math".to_string(), pcs(&[(0x20, 1.0), (0x30, 5.0)])),
            ("smsp__pcsamp_warps_issue_stalled_wait_not_issued".to_string(), pcs(&[(0x20, 9.0)])),
        ];
        let v = view(&listed, per_pc, &Metrics::new()).unwrap().unwrap();
        assert_eq!(v.columns, ["Warp Stall Sampling (All Samples)", "Instructions Executed"]);
        let rows: Vec<(&str, &[Option<f64>])> = v.rows.iter().map(|r| (r.address.as_deref().unwrap(), r.values.as_slice())).collect();
        assert_eq!(
            rows,
            [("0x10", &[Some(0.0), Some(4.0)][..]), ("0x20", &[Some(4.0), Some(2.0)][..]), ("0x30", &[Some(5.0), Some(0.0)][..]),]
        );
    }

    #[test]
    fn oversized_views_are_refused() {
        let per_pc =
            vec![("inst_executed".to_string(), pcs(&[(1, 1.0), (2, 1.0)])), ("thread_inst_executed".to_string(), pcs(&[(3, 1.0)]))];
        // Built-in columns (no list): 2 columns x 3 PCs = 6 values.
        assert_eq!(view_capped(&[], per_pc.clone(), &Metrics::new(), 5), Err(6));
        assert!(view_capped(&[], per_pc, &Metrics::new(), 6).unwrap().is_some());
    }
}
