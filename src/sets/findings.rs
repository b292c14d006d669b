//! What a set shows, each finding computed from the members' metrics with its numbers and its
//! denominator: the fastest member and the facts that set it apart, where the regime or the
//! primary problem changes along the set, how time scales with the work (and the busiest unit's
//! share of peak at each point), what each version step changed, and which pairs differ in one
//! thing. Only those pairs estimate an effect; the others are listed as not used.

use super::factors::View;
use super::members::Member;
use super::{thresholds, Change, KernelSet, MemberRef, Pair, SetFinding};
use crate::facts::FactKey;
use crate::format::duration;
use crate::rules::fmt_num;

/// The described set with everything it shows; its `members` are left empty for the caller to
/// move the view's members into (a set of thousands of members is not copied).
pub fn set_of(view: &View, name: String, varies: Vec<String>, order: String) -> KernelSet {
    let ms = view.members;
    let (compared, left_out) = shared_facts(ms);
    let per_thread = varies.iter().any(|v| v == "problem size");
    let fastest = fastest(ms, per_thread);
    let neighbours = neighbours(view);
    let pairs = pairs(view, &neighbours);
    let changes = changes(ms, &neighbours);
    let mut out: Vec<SetFinding> = Vec::new();
    let mut add = |kind: &str, text: String| out.push(SetFinding { kind: kind.into(), text });
    if let Some(f) = &fastest {
        add("fastest", fastest_text(ms, f, &compared, per_thread));
    }
    add("regime", regimes_text(ms));
    for c in &changes {
        add("change", format!("The {} changes from {} at {} to {} at {}.", c.what, c.before, c.from_value, c.after, c.at_value));
    }
    for line in scaling(ms, &pairs, &neighbours) {
        add("scaling", line);
    }
    if varies.iter().any(|v| v == "version") {
        // A version x file set: the version's effect at each launch, not steps along its order
        // (neighbours there differ in the version and the launch).
        let lines = if view.folded { super::effect::version_effects(ms, &pairs) } else { steps(ms, &pairs, &compared) };
        for line in lines {
            add(if view.folded { "effect" } else { "step" }, line);
        }
        if let Some(last) = ms.last() {
            add("left", left_text(last));
        }
    }
    add("pairs", pairs_text(&pairs));
    if !left_out.is_empty() {
        add(
            "metrics",
            format!(
            "Compared on the {} facts every member has; left out (missing in some member, e.g. another ncu version or section set): {}.",
            compared.len(),
            left_out.iter().map(|key| key.as_str()).collect::<Vec<_>>().join(", ")
        ),
        );
    }
    let mut summary = summary(&name, ms, &varies, fastest.as_ref(), &changes);
    if let Some(clause) = view.folded.then(|| super::effect::summary_clause(ms, &pairs)).flatten() {
        summary += &format!(" {clause}");
    }
    KernelSet {
        kind: view.kind,
        name,
        varies,
        order,
        members: Vec::new(),
        fastest,
        summary,
        summary_by: crate::report::writer::Writer::Expert,
        summary_refused: Vec::new(),
        findings: out,
        changes,
        pairs,
        compared_facts: compared,
        left_out_facts: left_out,
    }
}

fn short(m: &Member) -> String {
    let file = m.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{file}:{}", m.base())
}

/// Facts present in every member, and those present in some only.
fn shared_facts(ms: &[Member]) -> (Vec<FactKey>, Vec<FactKey>) {
    let mut compared = Vec::new();
    let mut left = Vec::new();
    let mut keys: Vec<FactKey> = ms.iter().flat_map(|m| m.facts.iter().map(|f| f.key)).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        if ms.iter().all(|m| m.fact(k).is_some()) {
            compared.push(k);
        } else {
            left.push(k);
        }
    }
    (compared, left)
}

/// What a member costs: its time, or its time per thread when the problem size varies (`per_thread`).
pub fn cost(m: &Member, per_thread: bool) -> Option<f64> {
    let d = m.duration_ns?;
    if per_thread {
        m.threads().filter(|t| *t > 0.0).map(|t| d / t)
    } else {
        Some(d)
    }
}

/// How far apart the timed members' times (per thread when `per_thread`) are, in percent of the
/// fastest, when that is within `time_noise_pct`: the members take the same time, and none is
/// faster. `None` when they differ by more, or fewer than two are timed.
pub fn same_time_spread_pct(ms: &[Member], per_thread: bool) -> Option<f64> {
    let costs: Vec<f64> = ms.iter().filter_map(|m| cost(m, per_thread)).filter(|c| *c > 0.0).collect();
    let (fast, slow) = (costs.iter().copied().fold(f64::INFINITY, f64::min), costs.iter().copied().fold(0.0, f64::max));
    let spread_pct = 100.0 * (slow / fast - 1.0);
    (costs.len() >= 2 && spread_pct <= thresholds().time_noise_pct).then_some(spread_pct)
}

/// The fastest member by time (or by time per thread when the problem size varies).
fn fastest(ms: &[Member], per_thread: bool) -> Option<MemberRef> {
    let cost = |m: &Member| cost(m, per_thread);
    let best = ms.iter().filter(|m| cost(m).is_some()).min_by(|a, b| cost(a).unwrap_or(0.0).total_cmp(&cost(b).unwrap_or(0.0)))?;
    Some(MemberRef {
        file: best.file.to_path_buf(),
        kernel: best.kernel.to_string(),
        value: best.value.clone(),
        duration_ns: best.duration_ns,
        by: if per_thread { "time per thread".into() } else { "time".into() },
    })
}

fn bound_of(m: &Member) -> String {
    if m.regime == "unknown" {
        return "regime unknown".into();
    }
    match m.shown_unit() {
        Some((u, p)) => format!("{} ({u} at {}% of peak)", m.regime, fmt_num(p)),
        None => m.regime.to_string(),
    }
}

/// The facts (of `keys`, preferred order in `expert/sets.toml`) that differ most between two
/// members, as "label a -> b", at most `n`. A change is scored by how much of the larger value it
/// removes (1 - smaller/larger), so a fact that appears or vanishes (bank conflicts 0% -> 93.9%)
/// ranks first; a change under 5% of the larger value, or a percentage that moves by less than
/// `min_pct_points`, is not a difference.
fn differing_facts(a: &Member, b: &Member, keys: &[FactKey], n: usize) -> Vec<String> {
    differing(a, b, keys, n).into_iter().map(|(_, text)| text).collect()
}

/// Facts a version step's line ("changed most: ...") and the fastest's against the slowest name, at most.
pub const STEP_FACTS: usize = 3;

/// [`differing_facts`] with each fact's label as the line writes it: (label, "label a -> b").
pub fn differing(a: &Member, b: &Member, keys: &[FactKey], n: usize) -> Vec<(String, String)> {
    let mut scored: Vec<(f64, usize, (String, String))> = Vec::new();
    for (rank, key) in thresholds().compared_facts.iter().enumerate() {
        if !keys.contains(key) {
            continue;
        }
        let (Some(fa), Some(fb)) = (a.fact(*key), b.fact(*key)) else { continue };
        let (x, y, unit) = (fa.value, fb.value, fa.form.unit);
        let Some(score) = change_score(x, y, unit) else { continue };
        let label = mid_sentence(fa.form.label);
        let text = format!("{label} {} -> {}", with_unit(x, unit), with_unit(y, unit));
        scored.push((score, rank, (label, text)));
    }
    scored.sort_by(|p, q| q.0.total_cmp(&p.0).then(p.1.cmp(&q.1)));
    scored.into_iter().take(n).map(|s| s.2).collect()
}

/// How much of the larger of two non-negative values a change removes (0 to 1), or `None` when
/// the change is too small to name (see [`differing_facts`]).
fn change_score(x: f64, y: f64, unit: &str) -> Option<f64> {
    let larger = x.max(y);
    if x < 0.0 || y < 0.0 || larger <= 0.0 {
        return None;
    }
    let score = (x - y).abs() / larger;
    let too_small = score < 0.05 || (unit == "%" && (x - y).abs() < thresholds().min_pct_points);
    (!too_small).then_some(score)
}

/// A label as it reads inside a sentence: the first word lower-cased unless it is an acronym or a
/// unit name ("Shared memory per block" -> "shared memory per block"; "DRAM throughput", "L2 cache
/// throughput" and "Compute (SM) throughput" keep their capitals where they are acronyms).
fn mid_sentence(label: &str) -> String {
    let first = label.split_whitespace().next().unwrap_or("");
    let acronym = first.chars().filter(|c| c.is_alphabetic()).count() > 1 && !first.chars().any(|c| c.is_lowercase());
    let acronym = acronym || first.chars().any(|c| c.is_ascii_digit());
    match label.chars().next() {
        Some(c) if !acronym => c.to_lowercase().chain(label.chars().skip(1)).collect(),
        _ => label.to_string(),
    }
}

/// Units that are counted nouns, written in the plural for any value but 1 ("40.7 waves").
const COUNTED_UNITS: &[&str] = &["byte", "wave", "block", "thread", "sector", "cycle", "branch", "inst", "request", "wavefront"];

/// A fact's value with its unit as a sentence writes it: "93.9%", "5120 bytes", "40.7 waves",
/// "1.50 byte/sector".
fn with_unit(value: f64, unit: &str) -> String {
    let shown = plain_number(value);
    match unit {
        "" | "ratio" => shown,
        "%" => format!("{shown}%"),
        "branch" if value != 1.0 => format!("{shown} branches"),
        "inst" if value != 1.0 => format!("{shown} instructions"),
        counted if value != 1.0 && COUNTED_UNITS.contains(&counted) => format!("{shown} {counted}s"),
        unit => format!("{shown} {unit}"),
    }
}

/// A number as a sentence writes it: [`fmt_num`]'s digits, but a small positive value with two
/// significant digits in decimals (0.00095, not 9.470e-4).
fn plain_number(value: f64) -> String {
    if value > 0.0 && value < 0.01 {
        let decimals = (1.0 - value.log10().floor()) as usize;
        format!("{value:.decimals$}")
    } else {
        fmt_num(value)
    }
}

fn fastest_text(ms: &[Member], f: &MemberRef, compared: &[FactKey], per_thread: bool) -> String {
    // Time, or time per thread when the problem size varies (ns per thread, shown with 3 digits).
    let cost = |m: &Member| -> f64 {
        let d = m.duration_ns.unwrap_or(0.0);
        if per_thread {
            m.threads().filter(|t| *t > 0.0).map_or(0.0, |t| d / t)
        } else {
            d
        }
    };
    let shown = |m: &Member| if per_thread { format!("{} ns per thread", fmt_num(cost(m))) } else { duration(cost(m)) };
    let timed: Vec<&Member> = ms.iter().filter(|m| m.duration_ns.is_some() && (!per_thread || m.threads().is_some())).collect();
    let best = timed.iter().find(|m| *m.file == *f.file && *m.kernel == *f.kernel && m.value == f.value);
    let slowest = timed.iter().max_by(|a, b| cost(a).total_cmp(&cost(b)));
    let (Some(best), Some(slow)) = (best, slowest) else { return String::new() };
    let (bc, sc) = (cost(best), cost(slow));
    if let Some(spread) = same_time_spread_pct(ms, per_thread) {
        let all = if timed.len() == 2 { "Both timed members".to_string() } else { format!("The {} timed members", timed.len()) };
        return format!(
            "{all} take the same time within noise ({}%): {} ({}) to {} ({}), {}% apart, so none is faster.",
            fmt_num(thresholds().time_noise_pct),
            shown(best),
            best.value,
            shown(slow),
            slow.value,
            fmt_num(spread)
        );
    }
    // Two members: the faster of the two.
    let (most, of, least) = if timed.len() == 2 { ("Faster", "of the", "slower") } else { ("Fastest", "of", "slowest") };
    let is = if best.regime == "unknown" { "Its regime cannot be told".to_string() } else { format!("It is {}", bound_of(best)) };
    let mut text = format!(
        "{most}{} {of} {} timed members: {} ({}) at {}, {}x the speed of the {least}, {} at {}. {is}",
        if per_thread { " per thread" } else { "" },
        timed.len(),
        best.value,
        short(best),
        shown(best),
        fmt_num(if bc > 0.0 { sc / bc } else { 0.0 }),
        slow.value,
        shown(slow),
    );
    text += &match &best.primary {
        Some(p) => format!(", its primary problem {p}."),
        None => ", with no problem found.".into(),
    };
    let diff = differing_facts(slow, best, compared, STEP_FACTS);
    if !std::ptr::eq(*best, *slow) && !diff.is_empty() {
        text += &format!(" Against the {least}: {}.", diff.join("; "));
    }
    text
}

fn regimes_text(ms: &[Member]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for m in ms {
        match counts.iter_mut().find(|c| c.0 == m.regime) {
            Some(c) => c.1 += 1,
            None => counts.push((m.regime.to_string(), 1)),
        }
    }
    if counts.len() == 1 {
        return untold(ms).unwrap_or_else(|| format!("{} {}.", all_members_are(ms.len()), counts[0].0));
    }
    let parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    let text = format!("Regimes over {} members: {}.", ms.len(), parts.join(", "));
    match untold(ms) {
        Some(why) => format!("{text} {why}"),
        None => text,
    }
}

/// "Both members are", "All 3 members are".
fn all_members_are(n: usize) -> String {
    if n == 2 {
        "Both members are".into()
    } else {
        format!("All {n} members are")
    }
}

/// Where some member's regime cannot be told (its profile has no throughput metrics): says so,
/// with what the profile lacks and the ncu option that collects it (the diagnosis's missing
/// section, [`Member::regime_missing`]).
fn untold(ms: &[Member]) -> Option<String> {
    let unknown: Vec<&Member> = ms.iter().filter(|m| m.regime == "unknown").collect();
    let subject = match unknown.len() {
        0 => return None,
        n if n == ms.len() => "No member's regime can be told".to_string(),
        1 => format!("The regime of {} cannot be told", unknown[0].value),
        n => format!("The regimes of {n} members cannot be told"),
    };
    let mut files: Vec<&std::path::Path> = unknown.iter().map(|m| &*m.file).collect();
    files.dedup();
    let profiles = if files.len() == 1 { "the profile has" } else { "the profiles have" };
    Some(match unknown.iter().find_map(|m| m.regime_missing.as_deref()) {
        Some((what, option)) => format!("{subject}: {profiles} no {what} metrics (collect them with {option})."),
        None => format!("{subject}."),
    })
}

/// Members next to each other along the set (0-based, in order): each and the next, or in a
/// version x file set each and the next of its own version.
fn neighbours(view: &View) -> Vec<(usize, usize)> {
    let ms = view.members;
    if !view.folded {
        return (1..ms.len()).map(|i| (i - 1, i)).collect();
    }
    let bases = &view.bases;
    // Each member's next member of the same version, found from the end in one pass.
    let mut next_of: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for i in (0..ms.len()).rev() {
        if let Some(j) = next_of.insert(bases[i].as_str(), i) {
            out.push((i, j));
        }
    }
    out.reverse();
    out
}

/// Where the regime or the primary problem differs from the member before (its neighbour in the
/// set's order).
fn changes(ms: &[Member], neighbours: &[(usize, usize)]) -> Vec<Change> {
    let mut out = Vec::new();
    for &(i, j) in neighbours {
        let (a, b) = (&ms[i], &ms[j]);
        if a.regime != b.regime && a.regime != "unknown" && b.regime != "unknown" {
            out.push(Change {
                what: "regime".into(),
                from_value: a.value.clone(),
                at_value: b.value.clone(),
                before: bound_of(a),
                after: bound_of(b),
            });
        }
        if a.primary != b.primary {
            let name = |p: &Option<&str>| p.unwrap_or("none").to_string();
            out.push(Change {
                what: "primary problem".into(),
                from_value: a.value.clone(),
                at_value: b.value.clone(),
                before: name(&a.primary),
                after: name(&b.primary),
            });
        }
    }
    out
}

/// Pairs of members: all of them up to `all_pairs_up_to` members, else neighbours in order (in a
/// version x file set also the versions in each file).
fn pairs(view: &View, neighbours: &[(usize, usize)]) -> Vec<Pair> {
    let n = view.members.len();
    let candidates: Vec<(usize, usize)> = if n <= thresholds().all_pairs_up_to {
        (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).collect()
    } else {
        let mut c = neighbours.to_vec();
        if view.folded {
            c.extend(same_file_pairs(view.members));
        }
        c.sort_unstable();
        c.dedup();
        c
    };
    candidates
        .into_iter()
        .map(|(i, j)| {
            let differs = view.differences(i, j);
            let (a, b) = (&view.members[i], &view.members[j]);
            let time_ratio = a.duration_ns.zip(b.duration_ns).filter(|(x, _)| *x > 0.0).map(|(x, y)| y / x);
            Pair { a: i + 1, b: j + 1, used: differs.len() == 1, differs, time_ratio }
        })
        .collect()
}

/// Every pair (i < j) of members from the same file.
fn same_file_pairs(ms: &[Member]) -> Vec<(usize, usize)> {
    let mut by_file: std::collections::HashMap<&std::ffi::OsStr, Vec<usize>> = std::collections::HashMap::new();
    for (i, m) in ms.iter().enumerate() {
        by_file.entry(m.file.as_os_str()).or_default().push(i);
    }
    by_file.values().flat_map(|idx| idx.iter().enumerate().flat_map(move |(k, &i)| idx[k + 1..].iter().map(move |&j| (i, j)))).collect()
}

fn pairs_text(pairs: &[Pair]) -> String {
    let used = pairs.iter().filter(|p| p.used).count();
    if let [p] = pairs {
        return match p.used {
            true => "The one pair differs in one thing and estimates its effect.".into(),
            false => format!("The one pair is not used: #{} and #{} differ in {}.", p.a, p.b, crate::format::and_list(&p.differs)),
        };
    }
    let text = format!("{used} of {} pairs differ in one thing and estimate its effect", pairs.len());
    let refused: Vec<String> = pairs
        .iter()
        .filter(|p| !p.used)
        .take(6)
        .map(|p| format!("#{} and #{} differ in {}", p.a, p.b, crate::format::and_list(&p.differs)))
        .collect();
    if refused.is_empty() {
        text + "."
    } else {
        let more = pairs.iter().filter(|p| !p.used).count().saturating_sub(refused.len());
        let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
        format!("{text}; not used: {}{more}.", refused.join("; "))
    }
}

/// How time scales with the work, from the one-factor pairs on the problem size (or a `--vary`
/// key), neighbours in order; with the busiest unit's share of peak at both points.
fn scaling(ms: &[Member], pairs: &[Pair], neighbours: &[(usize, usize)]) -> Vec<String> {
    let mut out = Vec::new();
    for p in pairs.iter().filter(|p| p.used && neighbours.contains(&(p.a - 1, p.b - 1))) {
        let factor = &p.differs[0];
        if matches!(factor.as_str(), "version" | "library configuration" | "run" | "gpu" | "template parameters") {
            continue;
        }
        let (a, b) = (&ms[p.a - 1], &ms[p.b - 1]);
        let Some(t) = p.time_ratio else { continue };
        let work = [
            ("threads", a.work.threads, b.work.threads),
            ("DRAM bytes", a.work.dram_bytes, b.work.dram_bytes),
            ("warp instructions", a.work.warp_instructions, b.work.warp_instructions),
        ];
        let ratios: Vec<String> = work
            .iter()
            .filter_map(|(n, x, y)| x.zip(*y).filter(|(x, _)| *x > 0.0).map(|(x, y)| format!("{n} x{}", fmt_num(y / x))))
            .collect();
        let at = |m: &Member| match (&m.busiest_unit, m.busiest_pct) {
            (Some(u), Some(pct)) => format!("{u} {}%", fmt_num(pct)),
            _ => "no unit measured".into(),
        };
        let units = if a.busiest_unit.is_none() && b.busiest_unit.is_none() {
            "no unit's throughput measured".to_string()
        } else {
            format!("busiest unit {} -> {}", at(a), at(b))
        };
        out.push(format!(
            "{} -> {} ({} only): time x{} ({} -> {}) for work {}; {units}.",
            a.value,
            b.value,
            factor,
            fmt_num(t),
            duration(a.duration_ns.unwrap_or(0.0)),
            duration(b.duration_ns.unwrap_or(0.0)),
            if ratios.is_empty() { "not measured".to_string() } else { ratios.join(", ") },
        ));
    }
    out
}

/// What each step of a version series changed in time and in the metrics (neighbours in order).
fn steps(ms: &[Member], pairs: &[Pair], compared: &[FactKey]) -> Vec<String> {
    let mut out = Vec::new();
    for w in 0..ms.len().saturating_sub(1) {
        let (a, b) = (&ms[w], &ms[w + 1]);
        let pair = pairs.iter().find(|p| p.a == w + 1 && p.b == w + 2);
        if let Some(p) = pair.filter(|p| !p.used) {
            out.push(format!("{} -> {}: not used, they differ in {}.", a.value, b.value, crate::format::and_list(&p.differs)));
            continue;
        }
        let time = match (a.duration_ns, b.duration_ns) {
            (Some(x), Some(y)) if x > 0.0 => {
                format!("time {} -> {} ({}{}%)", duration(x), duration(y), if y >= x { "+" } else { "" }, fmt_num(100.0 * (y - x) / x))
            }
            _ => "time not measured".into(),
        };
        let noise =
            a.duration_ns.zip(b.duration_ns).is_some_and(|(x, y)| x > 0.0 && 100.0 * (y - x).abs() / x < thresholds().time_noise_pct);
        let time = if noise { format!("{time}, within noise ({}%)", fmt_num(thresholds().time_noise_pct)) } else { time };
        let regime = if a.regime != b.regime { format!("; {} -> {}", a.regime, b.regime) } else { String::new() };
        let diff = differing_facts(a, b, compared, STEP_FACTS);
        let diff = if diff.is_empty() { String::new() } else { format!("; changed most: {}", diff.join("; ")) };
        out.push(format!("{} -> {}: {time}{regime}{diff}.", a.value, b.value));
    }
    out
}

fn left_text(last: &Member) -> String {
    match (&last.primary, last.primary_estimate_pct) {
        (Some(p), Some(e)) => {
            format!(
                "What is left in the last version ({}): {}; primary problem {p}, a fix saves at most {}% of its time.",
                last.value,
                bound_of(last),
                fmt_num(e)
            )
        }
        (Some(p), None) => format!("What is left in the last version ({}): {}; primary problem {p}.", last.value, bound_of(last)),
        (None, _) if last.regime == "unknown" => {
            format!("The last version ({}) has no problem the rules find, and its regime cannot be told.", last.value)
        }
        (None, _) => format!("The last version ({}) has no problem the rules find; it is {}.", last.value, bound_of(last)),
    }
}

fn summary(name: &str, ms: &[Member], varies: &[String], fastest: Option<&MemberRef>, changes: &[Change]) -> String {
    let what = if varies.is_empty() { "nothing".to_string() } else { crate::format::and_list(varies) };
    let mut s = format!("`{name}`: {} members, varying {what}.", ms.len());
    let per_thread = varies.iter().any(|v| v == "problem size");
    if same_time_spread_pct(ms, per_thread).is_some() {
        let all = if ms.len() == 2 { "Both members take" } else { "All take" };
        s += &format!(" {all} the same time within noise ({}%).", fmt_num(thresholds().time_noise_pct));
    } else if let Some(f) = fastest {
        s += &format!(
            " Fastest{}: {} ({}).",
            if f.by == "time" { "" } else { " per thread" },
            f.value,
            f.duration_ns.map(duration).unwrap_or_else(|| "?".into())
        );
    }
    match changes.iter().find(|c| c.what == "regime") {
        Some(c) => s += &format!(" The regime changes at {} ({} -> {}).", c.at_value, c.before, c.after),
        None if ms.iter().all(|m| m.regime == ms[0].regime) => match untold(ms) {
            Some(why) => s += &format!(" {why}"),
            None if ms.len() == 2 => s += &format!(" Both members are {}.", ms[0].regime),
            None => s += &format!(" Every member is {}.", ms[0].regime),
        },
        None => {}
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sets::group::tests::member;

    fn with_facts(kernel: &str, facts: &[(FactKey, f64, &'static str, &'static str)]) -> Member {
        let mut m = member("a.ncu-rep", kernel, 1024, 1, 10.0);
        m.set_facts(
            facts
                .iter()
                .map(|&(key, value, label, unit)| crate::sets::members::SetFact {
                    key,
                    value,
                    form: crate::sets::members::FactForm::of(label, unit),
                })
                .collect(),
        );
        m
    }

    #[test]
    fn a_fact_that_appears_or_vanishes_is_the_largest_difference() {
        let conflicts = (FactKey::SharedBankConflictPct, "Shared-memory wavefronts from bank conflicts", "%");
        let smem = (FactKey::SharedMemPerBlockBytes, "Shared memory per block", "byte");
        let excess = (FactKey::GlobalExcessiveSectorsPct, "Excessive global sectors", "%");
        let slow = with_facts(
            "setColReadCol(int *)",
            &[(conflicts.0, 93.9, conflicts.1, conflicts.2), (smem.0, 5120.0, smem.1, smem.2), (excess.0, 0.0, excess.1, excess.2)],
        );
        let fast = with_facts(
            "setRowReadRowUsingCUB(int *)",
            &[(conflicts.0, 0.0, conflicts.1, conflicts.2), (smem.0, 1024.0, smem.1, smem.2), (excess.0, 0.8, excess.1, excess.2)],
        );
        let keys = [conflicts.0, smem.0, excess.0];
        let diff = differing_facts(&slow, &fast, &keys, 3);
        assert_eq!(
            diff,
            vec![
                "shared-memory wavefronts from bank conflicts 93.9% -> 0%".to_string(),
                "shared memory per block 5120 bytes -> 1024 bytes".to_string()
            ],
            "a 0.8-point move is noise"
        );
    }

    #[test]
    fn labels_keep_their_acronyms_mid_sentence() {
        assert_eq!(mid_sentence("Shared memory per block"), "shared memory per block");
        assert_eq!(mid_sentence("DRAM throughput"), "DRAM throughput");
        assert_eq!(mid_sentence("L2 cache throughput"), "L2 cache throughput");
        assert_eq!(mid_sentence("Compute (SM) throughput"), "compute (SM) throughput");
    }

    #[test]
    fn small_changes_are_not_differences() {
        assert_eq!(change_score(100.0, 97.0, ""), None);
        assert_eq!(change_score(0.0, 0.0, "%"), None);
        assert_eq!(change_score(0.0, 1.5, "%"), None);
        assert_eq!(change_score(0.0, 4.0, "%"), Some(1.0));
        assert_eq!(change_score(0.0, 3.0, "sector"), Some(1.0));
        assert!((change_score(5120.0, 1024.0, "byte").unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(with_unit(40.7, "wave"), "40.7 waves");
        assert_eq!(with_unit(1.0, "wave"), "1 wave");
        assert_eq!(with_unit(2.0, "branch"), "2 branches");
        assert_eq!(with_unit(8.0, "byte/sector"), "8 byte/sector");
        assert_eq!(with_unit(9.47e-4, "wave"), "0.00095 waves");
    }
}
