//! The explain report as its templates see it, shared by every rendering of it (text, Markdown,
//! HTML, `--format context`, and `keet show`, which has only the stored JSON): the template
//! context built from the report's JSON (`keet.explain/2`) plus the facts in
//! [`crate::facts::Facts::all`] order. The templates and their filters are
//! [`crate::templating::report_environment`].
//!
//! Lower than [`super::explain`] and [`super::context`], which both use it and not each other's
//! internals.

use super::roofline::Chart;
use crate::explain::report::ExplainReport;
use serde_json::{json, Value};

/// The report as JSON plus what the templates need beside it: kernels in rank order, each with
/// `facts_list` (every fact of the representative launch, in [`crate::facts::Facts::all`] order)
/// `gain_rank` (1 = largest estimated gain; null without an estimate), `bar_pct` (time share
/// relative to the longest kernel) and `model_findings`; `totals`; and `chart`
/// (the roofline's roofs, placed points and unplaced kernels).
pub fn template_context(report: &ExplainReport) -> Value {
    let json = serde_json::to_value(report).expect("the explain report serialises");
    let facts = report.kernels.iter().map(|k| serde_json::to_value(k.analysis.facts.all()).expect("facts serialise")).collect();
    let mut v = context_from_json(json, facts);
    v["chart"] = serde_json::to_value(Chart::from_report(report)).expect("chart serialises");
    v
}

/// [`template_context`] from a report's JSON alone (what `keet show` has: the stored report),
/// with the facts lists read from the JSON by [`facts_list`]; `chart` is null (the roofline is
/// drawn from the typed report, for the HTML page only).
pub fn template_context_from_json(report: &Value) -> Value {
    let facts = report
        .get("kernels")
        .and_then(Value::as_array)
        .map(|ks| ks.iter().map(|k| Value::Array(facts_list(k.pointer("/analysis/facts").unwrap_or(&Value::Null)))).collect())
        .unwrap_or_default();
    let mut v = context_from_json(report.clone(), facts);
    if v.is_object() {
        v["chart"] = Value::Null;
    }
    v
}

/// The one place the context is computed: `report` is the report's JSON, `facts_lists[i]` the
/// facts list of `report.kernels[i]` (report order).
fn context_from_json(mut report: Value, facts_lists: Vec<Value>) -> Value {
    let src: Vec<Value> = report.get("kernels").and_then(Value::as_array).cloned().unwrap_or_default();
    let rank = |k: &Value| k.get("rank").and_then(Value::as_u64).unwrap_or(u64::MAX);
    let finite = |k: &Value, ptr: &str| k.pointer(ptr).and_then(Value::as_f64).filter(|x| x.is_finite());
    let mut order: Vec<usize> = (0..src.len()).collect();
    order.sort_by_key(|&i| rank(&src[i]));

    // Gain ranks: largest estimated gain first, kernels without an estimate unranked.
    let gain = |i: usize| finite(&src[i], "/estimated_gain_ns");
    let mut by_gain: Vec<usize> = (0..src.len()).filter(|&i| gain(i).is_some()).collect();
    by_gain.sort_by(|&a, &b| gain(b).unwrap().total_cmp(&gain(a).unwrap()).then(rank(&src[a]).cmp(&rank(&src[b]))));

    // Time-share bars are scaled to the longest kernel (its bar is full width).
    let max_share = src.iter().filter_map(|k| finite(k, "/kernel/time_share_pct")).fold(0.0, f64::max);
    let mut kernels = Vec::with_capacity(src.len());
    let (mut model, mut rules, mut dropped, mut explained_ns) = (0usize, 0usize, 0usize, 0f64);
    for &i in &order {
        let mut kv = src[i].clone();
        if !kv.is_object() {
            continue;
        }
        kv["facts_list"] = facts_lists.get(i).cloned().unwrap_or_else(|| json!([]));
        kv["gain_rank"] = match by_gain.iter().position(|&j| j == i) {
            Some(p) => json!(p + 1),
            None => Value::Null,
        };
        // (A share that is not a number gives a null bar, as NaN serialises.)
        let share = src[i].pointer("/kernel/time_share_pct").and_then(Value::as_f64).unwrap_or(f64::NAN);
        kv["bar_pct"] = json!(if max_share > 0.0 { 100.0 * share / max_share } else { 0.0 });
        let findings = src[i].get("findings").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let m = findings.iter().filter(|f| f.get("origin").and_then(Value::as_str) != Some("rules")).count();
        kv["model_findings"] = json!(m);
        model += m;
        rules += findings.len() - m;
        dropped += src[i].get("dropped").and_then(Value::as_array).map_or(0, Vec::len);
        if let Some(d) = finite(&src[i], "/kernel/total_duration_ns") {
            explained_ns += d;
        }
        kernels.push(kv);
    }
    let total = report.get("total_duration_ns").and_then(Value::as_f64).unwrap_or(0.0);
    let share = if total > 0.0 { 100.0 * explained_ns / total } else { 0.0 };
    if report.is_object() {
        report["kernels"] = Value::Array(kernels);
        report["totals"] = json!({
            "model_findings": model,
            "rules_findings": rules,
            "dropped": dropped,
            "explained_ns": explained_ns,
            "explained_share_pct": share,
        });
    }
    report
}

fn is_fact(v: &Value) -> bool {
    v.get("key").is_some_and(|k| k.is_string()) && v.get("value").is_some() && v.get("evidence").is_some_and(|e| e.is_array())
}

/// Every fact in a serialised [`crate::facts::Facts`], in [`crate::facts::Facts::all`] order: the
/// top-level facts, the roofline's, the occupancy limit's, the stalls'; then any other fact
/// found deeper (a newer report's additions).
pub fn facts_list(facts: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = vec![];
    let Some(obj) = facts.as_object() else { return out };
    out.extend(obj.values().filter(|v| is_fact(v)).cloned());
    if let Some(r) = obj.get("roofline").and_then(Value::as_object) {
        out.extend(r.values().filter(|v| is_fact(v)).cloned());
    }
    if let Some(f) = obj.get("occupancy_limit").and_then(|o| o.get("blocks_per_sm")).filter(|v| is_fact(v)) {
        out.push(f.clone());
    }
    for s in obj.get("stalls").and_then(Value::as_array).into_iter().flatten() {
        if let Some(f) = s.get("cycles_per_issue").filter(|v| is_fact(v)) {
            out.push(f.clone());
        }
    }
    fn walk(v: &Value, seen: &mut Vec<Value>) {
        if is_fact(v) {
            if !seen.contains(v) {
                seen.push(v.clone());
            }
            return;
        }
        match v {
            Value::Object(m) => m.values().for_each(|c| walk(c, seen)),
            Value::Array(a) => a.iter().for_each(|c| walk(c, seen)),
            _ => {}
        }
    }
    walk(facts, &mut out);
    out
}
