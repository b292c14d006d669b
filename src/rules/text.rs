//! The words of every rule finding: claim, why and fix, from the templates in
//! `expert/findings.toml` (one place an expert can review), rendered with minijinja.

use super::kind::KernelKind;
use super::Category;
use minijinja::Environment;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const TABLE: &str = include_str!("../../expert/findings.toml");

#[derive(Deserialize)]
struct RuleText {
    claim: String,
    why: String,
    why_by_design: Option<String>,
    fix: BTreeMap<String, String>,
}

struct Texts {
    rules: BTreeMap<String, RuleText>,
    stall_hints: BTreeMap<String, String>,
}

fn texts() -> &'static Texts {
    static T: OnceLock<Texts> = OnceLock::new();
    T.get_or_init(|| {
        let mut v: BTreeMap<String, toml::Value> = toml::from_str(TABLE).expect("expert/findings.toml parses (checked by a unit test)");
        let hints = v.remove("stall_hints").map(|h| h.try_into().expect("stall_hints are strings")).unwrap_or_default();
        let rules =
            v.into_iter().map(|(k, x)| (k.clone(), x.try_into().unwrap_or_else(|e| panic!("expert/findings.toml [{k}]: {e}")))).collect();
        Texts { rules, stall_hints: hints }
    })
}

fn env() -> &'static Environment<'static> {
    static E: OnceLock<Environment<'static>> = OnceLock::new();
    E.get_or_init(crate::templating::expert_environment)
}

/// Renders one expert template with `ctx` (strict: a missing variable is a bug in the table, caught by tests).
pub(crate) fn render_template(source: &str, tpl: &str, ctx: &serde_json::Value) -> String {
    env().render_str(tpl, ctx).unwrap_or_else(|e| panic!("{source}: {e:#}"))
}

/// What a stall reason means, in a few words.
pub fn stall_hint(reason: &str) -> &'static str {
    texts().stall_hints.get(reason).map(|s| s.as_str()).unwrap_or("see the Nsight Compute profiling guide")
}

/// The rendered words of one finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Words {
    pub claim: String,
    pub why: String,
    pub fix: String,
}

/// Renders rule `rule`'s words with `vars` (plus `kernel`). `variant` picks a specific fix
/// (`fix.<origin>_<variant>`, e.g. `user_registers`) before the origin's and the user's.
/// `by_design` uses the rule's `why_by_design` text when it has one.
pub fn render(rule: &str, kind: &KernelKind, variant: Option<&str>, by_design: bool, vars: serde_json::Value) -> Words {
    let t = texts().rules.get(rule).unwrap_or_else(|| panic!("expert/findings.toml has no [{rule}]"));
    let mut ctx = match vars {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    ctx.insert("kernel".into(), serde_json::to_value(kind).unwrap_or_default());
    let ctx = serde_json::Value::Object(ctx);
    let source = format!("expert/findings.toml [{rule}]");
    let r = |tpl: &str| render_template(&source, tpl, &ctx);
    let origin = kind.origin.as_str();
    let keys = [
        variant.map(|v| format!("{origin}_{v}")),
        Some(format!("{origin}_{}", kind.family.as_str())),
        Some(origin.to_string()),
        Some("user".to_string()),
    ];
    let fix = keys.iter().flatten().find_map(|k| t.fix.get(k)).map(|s| r(s)).unwrap_or_default();
    let why = match (&t.why_by_design, by_design) {
        (Some(w), true) => r(w),
        _ => r(&t.why),
    };
    Words { claim: r(&t.claim), why, fix }
}

/// Every rule id the rule layer uses, with its category (for the schema docs and tests).
pub const RULES: &[(&str, Category)] = &[
    ("uncoalesced-global", Category::MemoryCoalescing),
    ("shared-bank-conflicts", Category::SharedBankConflicts),
    ("thread-divergence", Category::Divergence),
    ("divergent-branches", Category::Divergence),
    ("occupancy-limiter", Category::OccupancyRegisters),
    ("achieved-occupancy-gap", Category::OccupancyOther),
    ("grid-too-small", Category::GridTooSmall),
    ("launch-bound", Category::LatencyBound),
    ("block-size-not-warp-multiple", Category::BlockSize),
    ("tail-effect", Category::TailEffect),
    ("register-spilling", Category::RegisterSpilling),
    ("fp64-pipe", Category::Fp64),
    ("tensor-cores-unused", Category::TensorCoreUnused),
    ("atomic-contention", Category::AtomicsContention),
    ("sol-memory", Category::MemoryBound),
    ("sol-compute", Category::ComputeBound),
    ("sol-latency", Category::LatencyBound),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_words_and_a_user_fix() {
        for (rule, _) in RULES {
            let t = texts().rules.get(*rule).unwrap_or_else(|| panic!("no text for {rule}"));
            assert!(t.fix.contains_key("user"), "{rule} has no fix.user");
            assert!(!t.claim.is_empty() && !t.why.is_empty());
        }
        for k in texts().rules.keys() {
            assert!(RULES.iter().any(|(r, _)| r == k), "expert/findings.toml [{k}] is used by no rule");
        }
        assert!(stall_hint("long_scoreboard").contains("memory"));
    }
}
