//! Mechanisms: which quantity of a kernel causes which (`expert/mechanisms.toml`), and what a model
//! sentence does with them. A connective ("which means", "so", "because") that joins two quantities
//! the table does not link is a non-sequitur; a regime named positively must be this kernel's; a unit
//! must be named in its role (the SM computes, L1/L2/DRAM move bytes). The same table classifies a
//! shown sentence (links facts, restates a fact, general) and gives the prompt the cause-and-effect
//! lines of a kernel's own facts. All checks are prose-gate checks ([`crate::prose`]).

use crate::facts::{BoundKind, FactKey, Facts};
use crate::rules::Category;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// The mechanisms table, as an expert reviews it.
pub const TABLE: &str = include_str!("../expert/mechanisms.toml");

/// The effect every cause may have: saying that a cause costs time is never a non-sequitur, and
/// never enough to make a sentence an explanation.
const TIME: &str = "time";
/// Links followed from one quantity to another: direct, or through one quantity in between.
const MAX_HOPS: usize = 2;
/// Words before a regime phrase that are looked at for `not_a_claim`.
const CLAIM_WINDOW_WORDS: usize = 4;
/// Words after a copula within which a role noun must start ("is the main memory unit").
const ROLE_NOUN_WITHIN_WORDS: usize = 3;

#[derive(Debug, Deserialize)]
struct Connective {
    phrases: Vec<String>,
    effect_first: bool,
    #[serde(default)]
    either_way: bool,
    /// A purpose ("to increase", "in order to"): the join is held only to `strict_effects`, since
    /// a fix's purpose often names what it changes through steps the table does not list.
    #[serde(default)]
    purpose: bool,
}

#[derive(Debug, Deserialize)]
struct Quantity {
    id: String,
    phrases: Vec<String>,
}

/// One cause -> effect link an expert accepts.
#[derive(Debug, Deserialize)]
pub struct Link {
    pub cause: String,
    pub effect: String,
    pub why: String,
    pub source: String,
    #[serde(default)]
    pub hint: Option<String>,
    #[serde(default)]
    pub categories: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Regime {
    phrases: Vec<String>,
    true_of: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Role {
    role: String,
    units: Vec<String>,
    nouns: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Table {
    connective: Vec<Connective>,
    quantity: Vec<Quantity>,
    link: Vec<Link>,
    regime: Vec<Regime>,
    not_a_claim: Vec<String>,
    hubs: Vec<String>,
    /// Quantities that only their own causes set (the grid, occupancy, registers): named as an
    /// effect, each must be reached from a cause the sentence names.
    #[serde(default)]
    strict_effects: Vec<String>,
    role: Vec<Role>,
    copulas: Vec<String>,
    /// Causes that can never lead to an effect (the inverse of a link): "different banks" never
    /// causes bank conflicts.
    #[serde(default)]
    contradiction: Vec<Contradiction>,
}

/// A cause that works against an effect, and why.
#[derive(Debug, Deserialize)]
struct Contradiction {
    cause: String,
    effect: String,
    why: String,
    #[allow(dead_code)]
    source: String,
}

/// A phrase of the table as words, and what it names.
#[derive(Debug, Clone)]
enum Mark {
    Quantity(String),
    /// A connective: does the cause follow it ("because"), and may it join an effect back to its
    /// cause ("which means")?
    Connective {
        effect_first: bool,
        either_way: bool,
        purpose: bool,
    },
}

struct Loaded {
    table: Table,
    /// Every phrase (words; a last word ending in `*` is a prefix) with its mark, longest first.
    phrases: Vec<(Vec<String>, Mark)>,
    /// cause -> effects.
    effects: BTreeMap<String, BTreeSet<String>>,
}

fn loaded() -> &'static Loaded {
    static L: OnceLock<Loaded> = OnceLock::new();
    L.get_or_init(|| {
        let table: Table = toml::from_str(TABLE).expect("expert/mechanisms.toml parses (checked by a unit test)");
        let mut phrases: Vec<(Vec<String>, Mark)> = Vec::new();
        for c in &table.connective {
            phrases.extend(c.phrases.iter().map(|p| {
                let mark = Mark::Connective { effect_first: c.effect_first, either_way: c.either_way, purpose: c.purpose };
                (words(p), mark)
            }));
        }
        for q in &table.quantity {
            phrases.extend(q.phrases.iter().map(|p| (words(p), Mark::Quantity(q.id.clone()))));
        }
        // Longest first; at equal length a connective wins over a quantity ("limits").
        phrases.sort_by_key(|(w, m)| (std::cmp::Reverse(w.len()), matches!(m, Mark::Quantity(_))));
        let mut effects: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for l in &table.link {
            effects.entry(l.cause.clone()).or_default().insert(l.effect.clone());
        }
        Loaded { table, phrases, effects }
    })
}

/// Lower-case words of `text`: hyphens split words, `/`, `_` and `µ` stay inside one.
pub fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '/' | '_' | '*' | '\'')))
        .map(|w| w.trim_matches(|c: char| c == '/' || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn matches_at(text: &[String], at: usize, phrase: &[String]) -> bool {
    phrase.len() <= text.len() - at
        && phrase.iter().zip(&text[at..]).all(|(p, w)| match p.strip_suffix('*') {
            Some(prefix) => w.starts_with(prefix),
            None => p == w,
        })
}

/// The marks of `text` in order (longest phrase first at each word), with the word each starts at.
fn marks(text: &[String]) -> Vec<(usize, Mark)> {
    let l = loaded();
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        match l.phrases.iter().find(|(p, _)| matches_at(text, at, p)) {
            Some((p, m)) => {
                out.push((at, m.clone()));
                at += p.len();
            }
            None => at += 1,
        }
    }
    out
}

/// Is `effect` reached from `cause` in at most [`MAX_HOPS`] links, passing through no hub?
fn causes(cause: &str, effect: &str) -> bool {
    let l = loaded();
    let mut frontier: BTreeSet<&str> = BTreeSet::from([cause]);
    for _ in 0..MAX_HOPS {
        let next: BTreeSet<&str> = frontier.iter().filter_map(|q| l.effects.get(*q)).flat_map(|s| s.iter().map(String::as_str)).collect();
        if next.contains(effect) {
            return true;
        }
        // A chain ends at a hub; it does not go on through one.
        frontier = next.into_iter().filter(|q| !l.table.hubs.iter().any(|h| h == q)).collect();
    }
    false
}

/// Two sets of quantities a connective joins.
struct Joined {
    cause: Vec<String>,
    effect: Vec<String>,
    /// The connective also reads an effect back to its cause ("which means").
    either_way: bool,
    /// A purpose ("to increase"): held to the strict effects only.
    purpose: bool,
}

impl Joined {
    /// Does `a` on the cause side lead to `b` on the effect side (or, for the "means" family, the
    /// other way)?
    fn leads(&self, a: &str, b: &str) -> bool {
        causes(a, b) || (self.either_way && causes(b, a))
    }

    /// Does the join make sense: a quantity of the cause side leads to one of the effect side, or
    /// the effect side only names the cause side's own quantities again? ("The grid leaves SMs
    /// idle. This causes time spent waiting on empty SMs": nothing there makes warps wait.)
    fn holds(&self) -> bool {
        let joins = self.purpose || self.links() || self.effect.iter().all(|b| self.cause.contains(b));
        joins && self.unreached_strict().is_empty()
    }

    /// Strict effects (`strict_effects`: the grid, occupancy, registers, ...) on the effect side
    /// that no quantity of the cause side leads to and that the cause side does not name itself:
    /// "the L2 throughput is only 52.2% of peak, leaving few warps to switch to" makes the L2 set
    /// the warps resident; "a CUDA Graph to increase the number of blocks" makes a graph add blocks.
    fn unreached_strict(&self) -> Vec<&str> {
        let strict = &loaded().table.strict_effects;
        let mut out: Vec<&str> = self
            .effect
            .iter()
            .filter(|b| strict.contains(b) && !self.cause.contains(b))
            .filter(|b| !self.cause.iter().any(|a| self.leads(a, b)))
            .map(String::as_str)
            .collect();
        out.dedup();
        out
    }

    /// Does a quantity of the cause side lead to a different one of the effect side?
    fn links(&self) -> bool {
        self.cause.iter().any(|a| self.effect.iter().any(|b| a != b && self.leads(a, b)))
    }
}

/// `text` with each causal ", as" written "because" ("... latency, as each SM has no work"); an
/// "as" that compares or lists (", as well as", ", as shown", ", as a result") is kept.
fn causal_as(text: &str) -> String {
    const NOT_CAUSAL: &[&str] = &[
        "well",
        "much",
        "many",
        "such",
        "if",
        "in",
        "long",
        "soon",
        "far",
        "opposed",
        "seen",
        "shown",
        "expected",
        "described",
        "noted",
        "mentioned",
        "measured",
        "reported",
        "listed",
        "given",
        "follows",
        "before",
        "usual",
        "possible",
        "few",
        "little",
        "part",
        "a",
        "an",
        "high",
        "low",
        "large",
        "small",
        "fast",
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(", as ") {
        let after = &rest[at + ", as ".len()..];
        let next: Vec<String> = after.split(|c: char| !c.is_alphanumeric()).take(2).map(str::to_lowercase).collect();
        // "as busy as the SM" compares.
        let compares = next.get(1).is_some_and(|w| w == "as");
        out.push_str(&rest[..at]);
        out.push_str(if compares || NOT_CAUSAL.contains(&next[0].as_str()) { ", as " } else { ", because " });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Each pair of quantity sets a connective of `text` joins.
fn joined(text: &str) -> Vec<Joined> {
    // Words, and the sentence each is in: what follows a connective ends with its sentence ("This
    // causes time spent on empty SMs. To fix this, launch a full wave of blocks": the blocks are
    // the next sentence's fix, not the effect), while what precedes it may reach back to the
    // sentence "This" refers to.
    let text = causal_as(text);
    let mut ws: Vec<String> = Vec::new();
    let mut sentence_of: Vec<usize> = Vec::new();
    for (n, sentence) in text.split_inclusive(". ").enumerate() {
        let sentence_words = words(sentence);
        sentence_of.extend(std::iter::repeat_n(n, sentence_words.len()));
        ws.extend(sentence_words);
    }
    let ms = marks(&ws);
    let sentence_at = |mark: usize| sentence_of.get(ms[mark].0).copied().unwrap_or(usize::MAX);
    let is_connective = |m: &Mark| matches!(m, Mark::Connective { .. });
    let segments: Vec<usize> = ms.iter().enumerate().filter(|(_, (_, m))| is_connective(m)).map(|(i, _)| i).collect();
    let first_word_of_sentence = |mark: usize| ms[mark].0 == 0 || sentence_of[ms[mark].0 - 1] != sentence_of[ms[mark].0];
    let mut out = Vec::new();
    for (n, &i) in segments.iter().enumerate() {
        let Mark::Connective { effect_first, either_way, purpose } = ms[i].1 else { continue };
        // "To reduce this cost, move fewer bytes": a purpose that opens its sentence names the
        // effect first and its fix after the comma, which words alone cannot split.
        if purpose && first_word_of_sentence(i) {
            continue;
        }
        let start = if n == 0 { 0 } else { segments[n - 1] + 1 };
        let next = segments.get(n + 1).copied().unwrap_or(ms.len());
        let end = (i + 1..next).find(|&m| sentence_at(m) != sentence_at(i)).unwrap_or(next);
        let ids = |r: std::ops::Range<usize>| -> Vec<String> {
            ms[r]
                .iter()
                .filter_map(|(_, m)| match m {
                    Mark::Quantity(q) if q != TIME => Some(q.clone()),
                    _ => None,
                })
                .collect()
        };
        let (mut cause, mut effect) = (ids(start..i), ids(i + 1..end));
        if effect_first {
            std::mem::swap(&mut cause, &mut effect);
        }
        if !cause.is_empty() && !effect.is_empty() {
            out.push(Joined { cause, effect, either_way, purpose });
        }
    }
    out
}

/// Connectives of `text` that join quantities the mechanisms table does not link, each with the
/// reason for the re-ask ("a grid with 32 blocks, which means it has 132 SMs available").
pub fn non_sequiturs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // "Spreads a column over 32 banks, which removes the conflicts": a sentence that undoes the
    // effect gives the contradiction's cause as a fix, rightly.
    const UNDOING: &[&str] = &[
        "remove",
        "removes",
        "removing",
        "avoid",
        "avoids",
        "reduce",
        "reduces",
        "eliminate",
        "eliminates",
        "prevent",
        "prevents",
        "fewer",
        "without",
        "no",
    ];
    let undoes = words(text).iter().any(|w| UNDOING.contains(&w.as_str()));
    for j in joined(text) {
        for c in loaded().table.contradiction.iter().filter(|c| !undoes && j.cause.contains(&c.cause) && j.effect.contains(&c.effect)) {
            out.push(format!(
                "it makes {} a cause of {}, but it works against it: {}",
                c.cause.replace('_', " "),
                c.effect.replace('_', " "),
                c.why
            ));
        }
        let unreached = j.unreached_strict();
        if !unreached.is_empty() {
            let unreached: Vec<String> = unreached.iter().map(|q| q.to_string()).collect();
            out.push(format!(
                "it makes {} change {}, but nothing there sets {} (say what causes what in this kernel)",
                name(&j.cause),
                name(&unreached),
                name(&unreached)
            ));
        } else if !j.holds() {
            out.push(format!(
                "it makes {} a cause of {}, but it is not (say what causes what in this kernel)",
                name(&j.cause),
                name(&j.effect)
            ));
        }
    }
    out
}

fn name(ids: &[String]) -> String {
    let mut v: Vec<String> = ids.iter().map(|q| q.replace('_', " ")).collect();
    v.dedup();
    v.join("/")
}

/// Does `text` join two different quantities that the table links (a cause and its effect)?
pub fn links(text: &str) -> bool {
    joined(text).iter().any(Joined::links)
}

/// What a shown model sentence does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SentenceKind {
    /// Names an identifier or a line of the kernel's source.
    NamesCode,
    /// Joins two of this kernel's quantities as cause and effect (a link of the table) and writes
    /// one of its numbers.
    Links,
    /// Writes this kernel's numbers but joins nothing: the facts block already says it.
    Restates,
    /// Neither a number of this kernel nor a link: advice or a general statement.
    General,
}

impl SentenceKind {
    pub const ALL: [SentenceKind; 4] = [SentenceKind::NamesCode, SentenceKind::Links, SentenceKind::Restates, SentenceKind::General];

    pub fn as_str(self) -> &'static str {
        match self {
            SentenceKind::NamesCode => "names code",
            SentenceKind::Links => "links facts",
            SentenceKind::Restates => "restates",
            SentenceKind::General => "general",
        }
    }
}

/// The kind of one sentence; `code_words` are the identifiers and line numbers of the kernel's
/// source that keet holds (empty without source).
pub fn classify(text: &str, code_words: &[String]) -> SentenceKind {
    let tokens: Vec<&str> = text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|t| !t.is_empty()).collect();
    let lower = text.to_lowercase();
    if tokens.iter().any(|t| code_words.iter().any(|c| c == t))
        || code_words.iter().any(|c| c.starts_with("line ") && lower.contains(c.as_str()))
    {
        return SentenceKind::NamesCode;
    }
    let has_number = !crate::grounding::numbers_in(text).is_empty();
    match (links(text), has_number) {
        (true, true) => SentenceKind::Links,
        (false, true) => SentenceKind::Restates,
        _ => SentenceKind::General,
    }
}

/// The sentences of a paragraph (split after ". ").
fn sentences(paragraph: &str) -> Vec<&str> {
    paragraph.split_inclusive(". ").map(str::trim).filter(|p| !p.is_empty()).collect()
}

/// Does every sentence of `paragraph` only restate the kernel's numbers, joining no two of its
/// quantities? Such an explanation says what the facts block already says.
pub fn only_restates(paragraph: &str) -> bool {
    let all = sentences(paragraph);
    !all.is_empty() && all.iter().all(|s| classify(s, &[]) == SentenceKind::Restates)
}

/// `paragraph` without its sentences that only restate numbers, and those sentences; `None` when
/// none restates or every one does (then the paragraph as a whole is judged).
pub fn without_restating(paragraph: &str) -> Option<(String, String)> {
    let (restating, kept): (Vec<&str>, Vec<&str>) =
        sentences(paragraph).into_iter().partition(|s| classify(s, &[]) == SentenceKind::Restates);
    (!restating.is_empty() && !kept.is_empty()).then(|| (kept.join(" "), restating.join(" ")))
}

/// The words of the kernel's source that name code: identifiers (with `_`, a digit or an inner
/// capital, or followed by `[` or `(`) of the source rows keet holds, and their line numbers.
pub fn code_words(rows: &[(Option<u64>, &str)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (line, text) in rows {
        if let Some(n) = line {
            out.push(format!("line {n}"));
        }
        let chars: Vec<char> = text.chars().collect();
        let mut at = 0;
        while at < chars.len() {
            if !(chars[at].is_alphabetic() || chars[at] == '_') {
                at += 1;
                continue;
            }
            let start = at;
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            let id: String = chars[start..at].iter().collect();
            let called = matches!(chars.get(at), Some('[' | '('));
            let shaped = id.contains('_') || id.chars().any(|c| c.is_ascii_digit()) || id.chars().skip(1).any(char::is_uppercase);
            if id.len() >= 2 && (shaped || called) && !CODE_KEYWORDS.contains(&id.as_str()) && !out.contains(&id) {
                out.push(id);
            }
        }
    }
    out
}

/// C++/CUDA words that are not the user's identifiers.
const CODE_KEYWORDS: &[&str] =
    &["if", "for", "while", "return", "sizeof", "switch", "__syncthreads", "__global__", "__shared__", "min", "max"];

/// A regime in words, as the facts block names it.
fn regime_words(kind: BoundKind) -> &'static str {
    match kind {
        BoundKind::Memory => "memory-bound",
        BoundKind::Compute => "compute-bound",
        BoundKind::Latency => "latency-bound",
        BoundKind::GridTooSmall => "grid-bound (its grid is too small)",
        BoundKind::Launch => "launch-bound",
    }
}

fn regime_of(name: &str) -> Option<BoundKind> {
    Some(match name {
        "memory" => BoundKind::Memory,
        "compute" => BoundKind::Compute,
        "latency" => BoundKind::Latency,
        "grid_too_small" => BoundKind::GridTooSmall,
        "launch" => BoundKind::Launch,
        _ => return None,
    })
}

/// Regimes `text` gives the kernel that its facts do not ("a latency-bound issue" of a memory-bound
/// kernel), each with the reason. Negated and hypothetical uses are not claims.
pub fn wrong_regimes(facts: &Facts, text: &str) -> Vec<String> {
    let Some(bound) = facts.bound.as_ref().map(|b| b.kind) else { return Vec::new() };
    let t = &loaded().table;
    let ws = words(text);
    let mut out = Vec::new();
    for r in &t.regime {
        if r.true_of.iter().filter_map(|n| regime_of(n)).any(|k| k == bound) {
            continue;
        }
        for p in &r.phrases {
            let pw = words(p);
            for at in (0..ws.len()).filter(|&i| matches_at(&ws, i, &pw)) {
                let window = &ws[at.saturating_sub(CLAIM_WINDOW_WORDS)..at];
                if window.iter().any(|w| t.not_a_claim.contains(w)) {
                    continue;
                }
                let reason = format!("it calls the kernel {}, but it is {}", p.replace(' ', "-"), regime_words(bound));
                if !out.contains(&reason) {
                    out.push(reason);
                }
            }
        }
    }
    out
}

/// Units `text` names in the other role ("L1/TEX and SM are the main memory access units": the SM
/// computes), each with the reason.
pub fn wrong_roles(text: &str) -> Vec<String> {
    let t = &loaded().table;
    let mut out = Vec::new();
    // Each clause on its own: the units before a copula, the role noun after it.
    for clause in text.split([',', ';', '.', ':', '(', ')']) {
        let ws = words(clause);
        let Some((cop_at, cop_len)) = t.copulas.iter().find_map(|c| {
            let cw = words(c);
            (0..ws.len()).find(|&i| matches_at(&ws, i, &cw)).map(|i| (i, cw.len()))
        }) else {
            continue;
        };
        let (subject, predicate) = (&ws[..cop_at], &ws[cop_at + cop_len..]);
        for role in &t.role {
            // The role noun is what the unit *is*: it follows the copula after at most a few
            // determiners and adjectives ("are the main memory access units").
            let has_noun = role.nouns.iter().any(|n| {
                let nw = words(n);
                (0..predicate.len().min(ROLE_NOUN_WITHIN_WORDS + 1)).any(|i| matches_at(predicate, i, &nw))
            });
            if !has_noun {
                continue;
            }
            for other in t.role.iter().filter(|o| o.role != role.role) {
                for unit in &other.units {
                    let uw = words(unit);
                    if (0..subject.len()).any(|i| matches_at(subject, i, &uw)) && !role.units.contains(unit) {
                        out.push(format!(
                            "it calls the {} a {} unit, but the {} {} ",
                            unit.to_uppercase(),
                            if role.role == "computes" { "compute" } else { "memory" },
                            unit.to_uppercase(),
                            other.role
                        ));
                    }
                }
            }
        }
    }
    out.iter().map(|r| r.trim_end().to_string()).collect()
}

/// The cause-and-effect lines the prompt shows for a problem of `category`: the table's hints whose
/// facts this kernel has, with its values written by `render` (`None` for a fact it lacks).
pub fn hints(category: Category, render: impl Fn(FactKey) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    for l in loaded().table.link.iter().filter(|l| l.categories.iter().any(|c| c == category.as_str())) {
        let Some(hint) = &l.hint else { continue };
        if let Some(text) = fill(hint, &render) {
            out.push(text);
        }
    }
    out
}

/// `template` with each `{fact_key}` replaced by `render(fact_key)`; `None` when one is missing or
/// names no fact key (the tests check that every hint's keys parse).
fn fill(template: &str, render: &impl Fn(FactKey) -> Option<String>) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}')? + open;
        out.push_str(&rest[..open]);
        out.push_str(&render(rest[open + 1..close].parse().ok()?)?);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// The links of the table, for the docs and tests.
pub fn all_links() -> &'static [Link] {
    &loaded().table.link
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_and_links_name_known_quantities_with_reasons() {
        let l = loaded();
        let ids: BTreeSet<&str> = l.table.quantity.iter().map(|q| q.id.as_str()).collect();
        for link in &l.table.link {
            assert!(ids.contains(link.cause.as_str()) && ids.contains(link.effect.as_str()), "{} -> {}", link.cause, link.effect);
            assert!(!link.why.is_empty() && !link.source.is_empty());
            for c in &link.categories {
                assert!(Category::parse(c).is_some(), "unknown category {c}");
            }
        }
        for r in &l.table.regime {
            assert!(r.true_of.iter().all(|n| regime_of(n).is_some()));
        }
    }

    /// The default model's sentences quoted in issue 36, and cases never seen.
    #[test]
    fn a_column_access_may_cause_bank_conflicts_but_different_banks_never_do() {
        assert!(non_sequiturs("This causes bank conflicts because the threads of a warp read one column of the tile.").is_empty());
        // The default model on a padded-tile edit (issue 37): the picture is inverted.
        let wrong = non_sequiturs(
            "This causes bank conflicts because each thread reads a different column of the tile, which touches 32 different banks.",
        );
        assert!(wrong.iter().any(|r| r.contains("works against it")), "{wrong:?}");
        assert!(non_sequiturs("Padding the tile spreads a column over 32 different banks, which removes the conflicts.")
            .iter()
            .all(|r| !r.contains("works against")));
    }

    #[test]
    fn non_sequiturs_are_refused() {
        let r = non_sequiturs("The kernel launches a grid with 32 blocks, which means it has 132 SMs available.");
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("grid a cause of sm count"), "{r:?}");
        assert_eq!(non_sequiturs("The GEMM is memory-bound because of large batch sizes.").len(), 1);
        assert_eq!(
            non_sequiturs("The last wave leaves 21.0% of the GPU block slots idle, which is why the kernel stalls on branches.").len(),
            1
        );
        // The default model on a 1-block launch: a small grid does not cause launch overhead.
        assert_eq!(
            non_sequiturs("The grid size is 1 block, which means that only one SM can run this kernel at a time. This results in high launch overhead and latency.")
                .len(),
            1
        );
        // ... and idle SMs do not make warps wait.
        assert_eq!(
            non_sequiturs("The grid has fewer blocks than the 58 SMs can run at once, so part of the GPU has no block. This causes a significant amount of time to be spent waiting on empty SMs.").len(),
            1
        );
        // Unseen: registers do not cause bank conflicts; divergence does not set the SM count.
        assert_eq!(non_sequiturs("Each thread uses 128 registers, which causes bank conflicts.").len(), 1);
        assert_eq!(non_sequiturs("Divergent branches mean that the GPU has 84 SMs.").len(), 1);
        for ok in [
            "The grid has 32 blocks for 132 SMs, which leaves 100 SMs idle.",
            "168 registers per thread limit theoretical occupancy to 25%, so few warps hide the long scoreboard stalls.",
            "Each warp's loads touch 8 sectors per request because consecutive threads read addresses 128 bytes apart.",
            "Bank conflicts split each shared load into 32 wavefronts, so warps wait on the MIO queue.",
            "Atomics on one address are serialised, so warps queue in L2.",
            "The kernel is memory-bound, so it takes 19.81 µs.",
            // A sentence without a connective joins nothing.
            "DRAM is at 64.5% of peak.",
        ] {
            assert_eq!(non_sequiturs(ok), Vec::<String>::new(), "{ok}");
        }
    }

    /// Issue 36: the grid, occupancy and registers change only through their own causes. Two of
    /// the default model's shown sentences on the corpus, cases never seen, and true ones.
    #[test]
    fn a_strict_effect_needs_a_cause_that_sets_it() {
        for wrong in [
            "The kernel is memory-bound, as the L2 cache throughput is only 52.2% of peak, leaving few warps to switch to while others wait.",
            "Fuse this kernel with its neighbours, or capture the sequence in a CUDA Graph to increase the number of blocks and SMs used.",
            // Never seen: bank conflicts do not lower occupancy; a graph does not change registers.
            "Bank conflicts serialise the shared loads, which reduces occupancy.",
            "Use a CUDA Graph to reduce the registers per thread.",
            // The default model on 1-block launches: the grid does not set the launch cost.
            "The grid of 1 block with 64 threads is too small for the 128 SMs on this GPU, leading to a significant launch overhead and latency.",
            "This results in a significant launch overhead and latency, as each SM has no work to do.",
        ] {
            let r = non_sequiturs(wrong);
            assert!(r.iter().any(|x| x.contains("nothing there sets")), "{wrong}: {r:?}");
        }
        for ok in [
            "The kernel's occupancy of 17.2% leaves few warps to switch to while others wait, so the wait is not hidden.",
            "Reduce the registers per thread with __launch_bounds__ to raise occupancy.",
            "Launch more blocks to fill the last wave.",
            "Increase the batch size to add blocks, so every SM gets work.",
            "The grid of 1 block is too small to fill the 128 SMs.",
            "Use a larger block size to reduce the number of blocks per SM.",
            "Capture the sequence in a CUDA Graph to reduce the launch overhead.",
            "Pad the shared memory tile to [32][33] so the 32 threads of a warp reading a column touch 32 different banks.",
            // A purpose is held only to the strict effects: the table need not list every step.
            "Use vectorized float4 loads to reduce the instructions per byte.",
            "Fuse this kernel with its neighbours to remove the launch overhead.",
            "Batch several launches into one, so the launch overhead is paid once.",
            // ", as" that compares is not a cause.
            "The kernel is memory-bound, as well as limited by its registers.",
            "The kernel is memory-bound, as DRAM is at 64.5% of peak.",
            "The FP64 pipe is 46.5% busy, as busy as the SM (46.5%): FP64 arithmetic is what the SM spends its time on.",
            // What follows a connective ends with its sentence; a purpose that opens a sentence
            // is not read (the default model's text on the corpus).
            "Part of the GPU has no block, which causes idle time. To fix this, launch at least one full wave of blocks (SMs x blocks per SM).",
            "The kernel moves many bytes. To reduce this cost, move fewer bytes by reusing values held in registers.",
        ] {
            assert_eq!(non_sequiturs(ok), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn padding_that_spreads_a_warp_over_banks_is_a_mechanism_and_the_reverse_is_not() {
        // The default model's paraphrase of the padding fix (smemSquare), refused before the
        // shared-memory, tile and index links to "different banks" were in the table.
        for ok in [
            "Pad the shared memory tile to [32][33] so the 32 threads of a warp reading a column touch 32 different banks.",
            "Padding the tile by one column shifts each row by one bank, so a warp reading a column touches 32 different banks.",
            // Never seen: the index, swizzled.
            "Swizzle the shared array's index with an XOR so each thread of a warp lands in a different bank.",
        ] {
            assert_eq!(non_sequiturs(ok), Vec::<String>::new(), "{ok}");
            assert!(links(ok), "a cause and its effect: {ok}");
        }
        // Different banks still do not cause conflicts.
        let r = non_sequiturs("The threads of a warp read 32 different banks, which causes bank conflicts.");
        assert!(r.iter().any(|x| x.contains("works against it")), "{r:?}");
    }

    #[test]
    fn sentences_are_classified() {
        assert_eq!(
            classify("168 registers per thread limit theoretical occupancy to 25%, so few warps hide the stalls.", &[]),
            SentenceKind::Links
        );
        // The restatement: one facts line and a generic gloss.
        assert_eq!(
            classify(
                "The L2 cache is at 68.2% of peak, which means that the kernel spends a significant amount of time loading data from memory.",
                &[]
            ),
            SentenceKind::Restates
        );
        assert_eq!(classify("Divergent branches can cause a warp to run with fewer threads than expected.", &[]), SentenceKind::General);
        assert_eq!(classify("The loads of tile_A are strided.", &["tile_A".into()]), SentenceKind::NamesCode);
    }

    #[test]
    fn wrong_roles_are_refused() {
        let r = wrong_roles("L1/TEX and SM are the main memory access units.");
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("SM") && r[0].contains("computes"), "{r:?}");
        assert_eq!(wrong_roles("DRAM is the main compute unit here.").len(), 1);
        assert!(wrong_roles("L1/TEX and L2 are the memory units the loads go through.").is_empty());
        assert!(wrong_roles("The SM is the unit that computes.").is_empty());
    }

    #[test]
    fn a_regime_must_be_the_kernels() {
        let memory = Facts {
            bound: Some(crate::facts::Bound { kind: BoundKind::Memory, busiest_unit: None, busiest_pct: None, because: vec![] }),
            ..Default::default()
        };
        let r = wrong_regimes(&memory, "The last wave leaves 21.0% of the GPU block slots idle, which is a latency-bound issue.");
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(wrong_regimes(&memory, "The kernel is memory-bound on DRAM.").is_empty());
        assert!(wrong_regimes(&memory, "The kernel is not latency-bound.").is_empty());
        assert!(wrong_regimes(&memory, "Once the loads are coalesced it will become compute-bound.").is_empty());
        assert_eq!(wrong_regimes(&memory, "This compute-bound kernel spends its time in FMA.").len(), 1);
    }

    #[test]
    fn hints_fill_the_kernels_values_and_skip_missing_facts() {
        let h = hints(Category::OccupancyRegisters, |k| match k {
            FactKey::RegistersPerThread => Some("168".into()),
            FactKey::TheoreticalOccupancyPct => Some("25%".into()),
            _ => None,
        });
        assert!(h.iter().any(|l| l == "168 registers per thread cap theoretical occupancy at 25%"), "{h:?}");
        // A hint whose facts are missing is left out, not shown with a hole.
        assert!(h.iter().all(|l| !l.contains('{')), "{h:?}");
    }
}

/// `KEET_SENTENCES=FILE cargo test --lib mechanism::calibrate -- --ignored --nocapture`: each
/// sentence of a `keet bench explain --sentences` file with its kind and the checks' reasons, for an
/// expert to read when the table changes.
#[cfg(test)]
mod calibrate {
    #[test]
    #[ignore = "reads KEET_SENTENCES, a file of a bench run"]
    fn calibrate() {
        let Some(path) = std::env::var_os("KEET_SENTENCES") else { return };
        let text = std::fs::read_to_string(path).expect("KEET_SENTENCES is readable");
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split('\t').collect();
            let Some(sentence) = cols.last() else { continue };
            let writer = cols.get(5).copied().unwrap_or_default();
            // KEET_WRITERS: the writers to read, comma-separated (default "model"; "all" for every
            // shown sentence, the expert's included).
            let writers = std::env::var("KEET_WRITERS").unwrap_or_else(|_| "model".into());
            if writer == "replaced" || !(writers == "all" || writers.split(',').any(|w| w == writer)) {
                continue;
            }
            for s in sentence.split_inclusive(". ") {
                let mut reasons = super::non_sequiturs(s);
                reasons.extend(super::wrong_roles(s));
                println!(
                    "{:<12} {} | {s}{}",
                    super::classify(s, &[]).as_str(),
                    cols.get(4).unwrap_or(&""),
                    if reasons.is_empty() { String::new() } else { format!("\n    REFUSED: {}", reasons.join("; ")) }
                );
            }
        }
    }
}
