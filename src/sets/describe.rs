//! What varies in a set: the factors that differ between each pair of members, each member's
//! value of them, and the members' order.
//!
//! Factors: the GPU; a `--vary` key; the version (a version series' kernel names, or files whose
//! names carry version marks, or a new template signature); template parameters (same count,
//! other values); the launch shape (block, or grid at the same thread count); the problem size
//! (threads differ beyond `same_threads_pct`); a run (files that differ in nothing else). A version
//! or `--vary` change carries the shape and size changes that come with it.

use super::factors::View;
use super::group::SetKind;
use super::members::Member;
use super::{findings, names, version_mark, KernelSet};
use std::cmp::Ordering;

/// Factors in the order a set names them.
const FACTORS: &[&str] = &["gpu", "version", "library configuration", "template parameters", "launch shape", "problem size", "run"];

/// Describes one set: what varies, each member's value, the order, and what the set shows.
pub fn describe(kind: SetKind, members: Vec<Member>, vary_keys: &[String]) -> KernelSet {
    let view = View::new(kind, &members, vary_keys);
    let mut varies: Vec<String> = Vec::new();
    for i in 0..members.len() {
        for j in i + 1..members.len() {
            for d in view.differences(i, j) {
                if !varies.contains(&d) {
                    varies.push(d);
                }
            }
        }
    }
    varies.sort_by_key(|v| FACTORS.iter().position(|f| f == v).unwrap_or(FACTORS.len()));
    let values: Vec<String> = (0..members.len()).map(|i| value_of(&view, i, &varies)).collect();
    let (order, how) = order_of(&view, &values, &varies);
    let file_values: Vec<String> = order.iter().map(|&i| view.file_values[i].clone()).collect();
    let (marks, folded) = (view.marks, view.folded);
    let mut slots: Vec<Option<Member>> = members.into_iter().map(Some).collect();
    let mut values: Vec<Option<String>> = values.into_iter().map(Some).collect();
    let ordered: Vec<Member> = order
        .iter()
        .map(|&i| {
            let mut m = slots[i].take().expect("the order names each member once");
            m.value = values[i].take().unwrap_or_default();
            m
        })
        .collect();
    let mut set = {
        let view = View::ordered(kind, &ordered, file_values, marks, folded, vary_keys);
        let name = match kind {
            SetKind::Kernel => view.bases[0].clone(),
            SetKind::Versions => names::series_name(&view.bases),
        };
        findings::set_of(&view, name, varies, how)
    };
    set.members = ordered;
    set
}

fn dims(d: Option<[u64; 3]>) -> String {
    match d {
        Some([x, 1, 1]) => x.to_string(),
        Some([x, y, 1]) => format!("{x}x{y}"),
        Some([x, y, z]) => format!("{x}x{y}x{z}"),
        None => "?".into(),
    }
}

/// Member `i`'s value of every varying factor, joined.
fn value_of(view: &View, i: usize, varies: &[String]) -> String {
    let m = &view.members[i];
    let blocks_vary = view.members.iter().any(|o| o.block_size != m.block_size);
    let parts: Vec<String> = varies
        .iter()
        .map(|f| match f.as_str() {
            "gpu" => m.gpu.as_deref().unwrap_or("?").to_string(),
            "version" | "library configuration" if view.kind == SetKind::Versions => m.base(),
            "version" | "run" => view.file_values[i].clone(),
            "template parameters" => format!("<{}>", names::parse(&m.kernel).template_args.unwrap_or_default().join(", ")),
            "launch shape" if blocks_vary => format!("block {}", dims(m.block_size)),
            "launch shape" => format!("grid {}", dims(m.grid_size)),
            "problem size" => format!("{} threads", m.threads().map(crate::rules::fmt_num).unwrap_or_else(|| "?".into())),
            key => format!("{key}={}", m.path_values.get(key).cloned().unwrap_or_else(|| "?".into())),
        })
        .collect();
    if parts.is_empty() {
        view.file_values[i].clone()
    } else {
        parts.join(", ")
    }
}

/// The members' order and how it was chosen: launch order for versions in one file, version
/// marks (natural order) across files, time (slowest first) for versions without marks, else the
/// varying values (numbers as numbers).
fn order_of(view: &View, values: &[String], varies: &[String]) -> (Vec<usize>, String) {
    let ms = view.members;
    let mut order: Vec<usize> = (0..ms.len()).collect();
    let one_file = ms.iter().all(|m| m.same_file(&ms[0]));
    let marked = |i: usize| version_mark().is_match(&values[i]) || version_mark().is_match(&names::file_stem(&ms[i].file));
    if view.folded {
        // Each file's versions together (its launch shape and size), in launch order.
        order.sort_by(|&a, &b| {
            config_cmp(view, a, b)
                .then_with(|| names::natural_cmp(&view.file_values[a], &view.file_values[b]))
                .then(ms[a].launch.cmp(&ms[b].launch))
        });
        return (order, "the varying value, then launch order in each report".into());
    }
    if varies.iter().any(|v| v == "version" || v == "library configuration") {
        if one_file {
            order.sort_by_key(|&i| ms[i].launch);
            return (order, "launch order in the report".into());
        }
        if view.kind == SetKind::Kernel || (0..ms.len()).all(marked) {
            order.sort_by(|&a, &b| names::natural_cmp(&view.file_values[a], &view.file_values[b]).then(ms[a].launch.cmp(&ms[b].launch)));
            return (order, "version marks in the file names".into());
        }
        order.sort_by(|&a, &b| ms[b].duration_ns.unwrap_or(0.0).total_cmp(&ms[a].duration_ns.unwrap_or(0.0)));
        return (order, "time, slowest first (the names carry no version marks)".into());
    }
    order.sort_by(|&a, &b| {
        config_cmp(view, a, b).then_with(|| names::natural_cmp(&values[a], &values[b])).then(ms[a].launch.cmp(&ms[b].launch))
    });
    (order, "the varying value".into())
}

/// Members `a` and `b` by what their launches vary in: the `--vary` keys, the GPU, the problem
/// size, then the block (its threads, then its shape).
fn config_cmp(view: &View, a: usize, b: usize) -> Ordering {
    let (x, y) = (&view.members[a], &view.members[b]);
    let keys = view.vary_keys.iter().map(|k| {
        names::natural_cmp(x.path_values.get(k).map(String::as_str).unwrap_or(""), y.path_values.get(k).map(String::as_str).unwrap_or(""))
    });
    let product = |d: Option<[u64; 3]>| d.map(|d| d.iter().product::<u64>()).unwrap_or(0);
    keys.fold(Ordering::Equal, Ordering::then)
        .then_with(|| x.gpu.cmp(&y.gpu))
        .then_with(|| x.threads().unwrap_or(0.0).total_cmp(&y.threads().unwrap_or(0.0)))
        .then_with(|| product(x.block_size).cmp(&product(y.block_size)))
        .then_with(|| x.block_size.cmp(&y.block_size))
}
