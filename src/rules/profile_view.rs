//! The whole profile, not only kernels: time by kernel family, and profile-level findings (many short
//! launches, a dominant family, the largest opportunities), from the per-kernel diagnoses. Works the
//! same on one profile and on a batch of them. Words and thresholds are in `expert/profile.toml`.

use super::kind::Family;
use super::{fmt_num, thresholds, Severity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

const TABLE: &str = include_str!("../../expert/profile.toml");

/// Profile-level finding categories (the documented list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileCategory {
    LaunchOverhead,
    DominantFamily,
    TopOpportunities,
}

impl ProfileCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileCategory::LaunchOverhead => "launch-overhead",
            ProfileCategory::DominantFamily => "dominant-family",
            ProfileCategory::TopOpportunities => "top-opportunities",
        }
    }
}

/// One kernel (identical launches grouped) as the profile view needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelTime {
    pub name: String,
    pub block_size: Option<[u64; 3]>,
    pub grid_size: Option<[u64; 3]>,
    pub family: Family,
    pub launches: usize,
    pub total_ns: f64,
    /// Estimated gain of fixing the primary problem, ns of the profile (upper bound).
    pub gain_ns: Option<f64>,
    /// The primary finding's category.
    pub primary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyTime {
    pub family: Family,
    pub label: String,
    pub time_ns: f64,
    pub share_pct: f64,
    pub kernels: usize,
    pub launches: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFinding {
    pub category: ProfileCategory,
    pub severity: Severity,
    pub claim: String,
    pub explanation: String,
    pub suggestion: String,
    /// The time this finding is about, ns, and its share of the profiled time.
    pub time_ns: f64,
    pub share_pct: f64,
}

/// Time by family and the profile-level findings (recomputed from the batch table when shard
/// reports are merged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProfileView {
    pub families: Vec<FamilyTime>,
    #[serde(rename = "profile_findings")]
    pub findings: Vec<ProfileFinding>,
}

#[derive(Deserialize)]
struct Table {
    thresholds: Thresholds,
    #[serde(rename = "launch-overhead")]
    launch_overhead: Text,
    #[serde(rename = "dominant-family")]
    dominant_family: FamilyText,
    #[serde(rename = "top-opportunities")]
    top_opportunities: Text,
}

#[derive(Deserialize)]
struct Thresholds {
    launch_overhead_min_launches: usize,
    launch_overhead_min_share_pct: f64,
    dominant_family_share_pct: f64,
    dominant_family_max_share_pct: f64,
    top_opportunities: usize,
}

#[derive(Deserialize)]
struct Text {
    claim: String,
    why: String,
    fix: String,
}

#[derive(Deserialize)]
struct FamilyText {
    claim: String,
    why: BTreeMap<String, String>,
    fix: String,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| toml::from_str(TABLE).expect("expert/profile.toml parses (checked by a unit test)"))
}

fn render(tpl: &str, ctx: &serde_json::Value) -> String {
    super::text::render_template("expert/profile.toml", tpl, ctx)
}

fn severity(share_pct: f64) -> Severity {
    if share_pct >= thresholds::SEVERITY_HIGH_PCT {
        Severity::High
    } else if share_pct >= thresholds::SEVERITY_MEDIUM_PCT {
        Severity::Medium
    } else {
        Severity::Low
    }
}

/// Time by family and profile-level findings over `kernels` (all kernels of the profile or batch).
pub fn profile_view(kernels: &[KernelTime]) -> ProfileView {
    let t = table();
    let total: f64 = kernels.iter().map(|k| k.total_ns).sum();
    if total <= 0.0 {
        return ProfileView::default();
    }
    let families = family_times(kernels, total);
    let findings = [launch_overhead(kernels, total, t), dominant_family(&families, t), top_opportunities(kernels, total, t)]
        .into_iter()
        .flatten()
        .collect();
    ProfileView { families, findings }
}

/// Each family's time and share of `total_ns`, the largest first (families with no kernel left out).
fn family_times(kernels: &[KernelTime], total: f64) -> Vec<FamilyTime> {
    let mut families: Vec<FamilyTime> = Family::ALL
        .iter()
        .map(|f| {
            let ks: Vec<&KernelTime> = kernels.iter().filter(|k| k.family == *f).collect();
            let time: f64 = ks.iter().map(|k| k.total_ns).sum();
            FamilyTime {
                family: *f,
                label: f.label().to_string(),
                time_ns: time,
                share_pct: 100.0 * time / total,
                kernels: ks.len(),
                launches: ks.iter().map(|k| k.launches).sum(),
            }
        })
        .filter(|f| f.kernels > 0)
        .collect();
    families.sort_by(|a, b| b.time_ns.total_cmp(&a.time_ns));
    families
}

/// Many short launches, when they are many and take a visible share.
fn launch_overhead(kernels: &[KernelTime], total: f64, t: &Table) -> Option<ProfileFinding> {
    let short: Vec<&KernelTime> =
        kernels.iter().filter(|k| k.launches > 0 && k.total_ns / (k.launches as f64) < thresholds::TINY_LAUNCH_NS).collect();
    let n: usize = short.iter().map(|k| k.launches).sum();
    let time: f64 = short.iter().map(|k| k.total_ns).sum();
    let share = 100.0 * time / total;
    if n >= t.thresholds.launch_overhead_min_launches && share >= t.thresholds.launch_overhead_min_share_pct {
        let floor_share = 100.0 * (n as f64 * thresholds::LAUNCH_FLOOR_NS).min(time) / total;
        let ctx = serde_json::json!({
            "launches": n, "tiny_us": thresholds::TINY_LAUNCH_NS / 1000.0, "share": share, "time_us": time / 1000.0,
            "floor_us": thresholds::LAUNCH_FLOOR_NS / 1000.0, "floor_share": floor_share,
        });
        let x = &t.launch_overhead;
        Some(ProfileFinding {
            category: ProfileCategory::LaunchOverhead,
            severity: severity(share),
            claim: render(&x.claim, &ctx),
            explanation: render(&x.why, &ctx),
            suggestion: render(&x.fix, &ctx),
            time_ns: time,
            share_pct: share,
        })
    } else {
        None
    }
}

/// A dominant family: only a named family beside others that take a visible share. "GEMM
/// kernels take 100%" on a profile of GEMMs, or "other kernels take 60%", tells the reader
/// nothing the kernel list does not.
fn dominant_family(families: &[FamilyTime], t: &Table) -> Option<ProfileFinding> {
    let th = &t.thresholds;
    let dominant = families
        .first()
        .filter(|f| (th.dominant_family_share_pct..=th.dominant_family_max_share_pct).contains(&f.share_pct) && f.family != Family::Other);
    if let Some(f) = dominant {
        let ctx = serde_json::json!({
            "family_label": f.label, "share": f.share_pct, "kernels": f.kernels, "launches": f.launches,
        });
        let x = &t.dominant_family;
        let why = x.why.get(f.family.as_str()).or_else(|| x.why.get("other")).map(|w| render(w, &ctx)).unwrap_or_default();
        Some(ProfileFinding {
            category: ProfileCategory::DominantFamily,
            severity: severity(f.share_pct),
            claim: render(&x.claim, &ctx),
            explanation: why,
            suggestion: render(&x.fix, &ctx),
            time_ns: f.time_ns,
            share_pct: f.share_pct,
        })
    } else {
        None
    }
}

/// The largest opportunities (never added up: the bounds overlap).
fn top_opportunities(kernels: &[KernelTime], total: f64, t: &Table) -> Option<ProfileFinding> {
    let mut opp: Vec<&KernelTime> = kernels.iter().filter(|k| k.gain_ns.is_some_and(|g| g > 0.0)).collect();
    opp.sort_by(|a, b| b.gain_ns.unwrap_or(0.0).total_cmp(&a.gain_ns.unwrap_or(0.0)));
    opp.truncate(t.thresholds.top_opportunities);
    if let Some(best) = opp.first() {
        let items: Vec<String> = opp
            .iter()
            .map(|k| {
                let name = launch_name(k);
                format!(
                    "{name} up to {} ({}% of the profile, {})",
                    crate::format::duration_3(k.gain_ns.unwrap_or(0.0)),
                    fmt_num(100.0 * k.gain_ns.unwrap_or(0.0) / total),
                    k.primary.as_deref().unwrap_or("?")
                )
            })
            .collect();
        let ctx = serde_json::json!({ "items": items.join("; ") });
        let x = &t.top_opportunities;
        let g = best.gain_ns.unwrap_or(0.0);
        Some(ProfileFinding {
            category: ProfileCategory::TopOpportunities,
            severity: severity(100.0 * g / total),
            claim: render(&x.claim, &ctx),
            explanation: render(&x.why, &ctx),
            suggestion: render(&x.fix, &ctx),
            time_ns: g,
            share_pct: 100.0 * g / total,
        })
    } else {
        None
    }
}

/// A kernel as the opportunities name it: its short name and its launch shape, as the report's
/// kernel sections show it (two launch shapes of `fused_moe_kernel` are two kernels to the reader,
/// and the shape says which launch of the list below is meant).
fn launch_name(k: &KernelTime) -> String {
    let name = super::kind::short_kernel_name(&k.name);
    let shape = |label: &str, s: Option<[u64; 3]>| s.map(|[x, y, z]| format!(" {label} ({x},{y},{z})")).unwrap_or_default();
    format!("{name}{}{}", shape("grid", k.grid_size), shape("block", k.block_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(name: &str, family: Family, launches: usize, total_ns: f64, gain: Option<f64>) -> KernelTime {
        KernelTime {
            name: name.into(),
            block_size: None,
            grid_size: None,
            family,
            launches,
            total_ns,
            gain_ns: gain,
            primary: Some("grid-too-small".into()),
        }
    }

    #[test]
    fn short_launches_dominant_family_and_opportunities() {
        let v = profile_view(&[
            k("gemm", Family::Gemm, 10, 620_000.0, Some(100_000.0)),
            k("norm", Family::Normalization, 40, 160_000.0, Some(90_000.0)),
            k("add", Family::Elementwise, 60, 220_000.0, None),
        ]);
        assert_eq!(v.families[0].family, Family::Gemm);
        approx::assert_relative_eq!(v.families[0].share_pct, 62.0);
        let cats: Vec<_> = v.findings.iter().map(|f| f.category).collect();
        assert_eq!(cats, [ProfileCategory::LaunchOverhead, ProfileCategory::DominantFamily, ProfileCategory::TopOpportunities]);
        // 100 launches averaging 4 and 3.7 us: 38% of the time.
        assert!(v.findings[0].claim.starts_with("100 launches shorter than 5 µs take 38% "), "{}", v.findings[0].claim);
        assert!(v.findings[1].claim.starts_with("GEMM kernels take 62%"), "{}", v.findings[1].claim);
        // Opportunities are listed, never summed.
        assert!(v.findings[2].claim.contains("gemm up to 100 µs") && v.findings[2].claim.contains("norm up to 90 µs"));
        approx::assert_relative_eq!(v.findings[2].share_pct, 10.0);
    }

    #[test]
    fn no_dominant_family_alone_or_unnamed() {
        let dominant = |v: &ProfileView| v.findings.iter().any(|f| f.category == ProfileCategory::DominantFamily);
        // One family is the whole profile (a single transpose kernel): nothing to say about families.
        assert!(!dominant(&profile_view(&[k("transpose", Family::Elementwise, 1, 50_000.0, None)])));
        // "Other" kernels are not a family a reader can act on.
        assert!(!dominant(&profile_view(&[k("a", Family::Other, 1, 900_000.0, None), k("b", Family::Gemm, 1, 100_000.0, None)])));
        // Nor one beside others that take almost nothing.
        assert!(!dominant(&profile_view(&[k("a", Family::Elementwise, 1, 990_000.0, None), k("b", Family::Attention, 1, 10_000.0, None)])));
        // A named family beside another still is.
        assert!(dominant(&profile_view(&[k("a", Family::Gemm, 1, 900_000.0, None), k("b", Family::Other, 1, 100_000.0, None)])));
    }

    #[test]
    fn opportunities_name_a_kernel_by_what_it_is_and_tell_two_launch_shapes_apart() {
        let moe = |grid: u64, gain: f64| KernelTime {
            grid_size: Some([grid, 1, 1]),
            block_size: Some([128, 1, 1]),
            ..k("fused_moe_kernel", Family::Gemm, 1, 50_000.0, Some(gain))
        };
        let flash = "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::Mainloop<2>>>>(T1::Params)";
        let v = profile_view(&[moe(256, 20_000.0), moe(192, 10_000.0), k(flash, Family::Attention, 1, 90_000.0, Some(40_000.0))]);
        let top = v.findings.iter().find(|f| f.category == ProfileCategory::TopOpportunities).unwrap();
        assert!(top.claim.contains("gains: FlashAttnFwdSm90 up to 40 µs"), "no shape where the profile has none: {}", top.claim);
        assert!(top.claim.contains("fused_moe_kernel grid (256,1,1) block (128,1,1) up to 20 µs"), "{}", top.claim);
        assert!(top.claim.contains("fused_moe_kernel grid (192,1,1) block (128,1,1) up to 10 µs"), "{}", top.claim);
    }

    #[test]
    fn few_short_launches_are_no_finding() {
        let v = profile_view(&[k("a", Family::Other, 3, 9_000.0, None), k("b", Family::Other, 1, 1_000_000.0, None)]);
        assert!(v.findings.iter().all(|f| f.category != ProfileCategory::LaunchOverhead));
        assert!(profile_view(&[]).findings.is_empty());
    }
}
