//! Which members form a set, and which kernel of one side plays the role of a kernel of the other
//! (a kernel renamed in a fix, for `keet compare`).
//!
//! - The same kernel: the same base name (template arguments and parameters aside), or the same
//!   user key (`--set-key REGEX`, its first capture group or whole match on the kernel name).
//! - Versions of one kernel under different names: the same name stem, and in one file the same
//!   launch shape; across files, the only kernel of that stem in each file, with the same launch
//!   shape, the same work (FLOPs) or the largest share of its file's time.
//! - Versions repeated across files: series found in one file each, of one stem, holding at least
//!   two of the same versions (a sweep that runs every version at each size) are one set of
//!   (version x file); its version effect comes only from the pairs that differ in the version alone.

use super::members::Member;
use super::names;
use super::thresholds;
use std::collections::HashMap;

/// What holds a set together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetKind {
    /// One kernel (one base name or user key) across files, launch shapes or GPUs.
    Kernel,
    /// Successive versions of a kernel under different names sharing a name stem.
    Versions,
}

/// The sets among `members`, as member indices: first every kernel set, then every version series.
pub fn sets(members: &[Member], key: Option<&regex::Regex>) -> Vec<(SetKind, Vec<usize>)> {
    let keys: Vec<String> = members.iter().map(|m| kernel_key(&m.kernel, key)).collect();
    // Each key's members, keys in the order first seen.
    let mut slot_of: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let slot = *slot_of.entry(k.as_str()).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[slot].push(i);
    }
    let mut out: Vec<(SetKind, Vec<usize>)> = groups.into_iter().filter(|idx| idx.len() >= 2).map(|idx| (SetKind::Kernel, idx)).collect();
    out.extend(fold(members, version_series(members, &keys)).into_iter().map(|v| (SetKind::Versions, v)));
    out
}

/// A folded set's stem and versions (base names).
type Folded = (String, Vec<String>);

/// Folds the series found in one file each that share a stem and at least two versions (base
/// names) into one set of (version x file), in the order first seen; other series stay as they are.
fn fold(members: &[Member], series: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
    let one_file = |g: &[usize]| g.iter().all(|&i| members[i].same_file(&members[g[0]]));
    let bases = |g: &[usize]| {
        let mut b: Vec<String> = g.iter().map(|&i| members[i].base()).collect();
        b.sort();
        b.dedup();
        b
    };
    // Each folded set with its stem and versions; a series that cannot fold is its own entry.
    let mut out: Vec<(Option<Folded>, Vec<usize>)> = Vec::new();
    for g in series {
        if !one_file(&g) {
            out.push((None, g));
            continue;
        }
        let (stem, versions) = (names::stem(&members[g[0]].base()), bases(&g));
        let into = out
            .iter_mut()
            .find(|(key, _)| key.as_ref().is_some_and(|(s, v)| *s == stem && v.iter().filter(|b| versions.contains(b)).count() >= 2));
        match into {
            Some((Some((_, known)), idx)) => {
                known.extend(versions);
                known.sort();
                known.dedup();
                idx.extend(g);
            }
            _ => out.push((Some((stem, versions)), g)),
        }
    }
    out.into_iter().map(|(_, g)| g).collect()
}

/// The key that makes launches one kernel: the user key's capture, else the base name.
pub fn kernel_key(name: &str, key: Option<&regex::Regex>) -> String {
    if let Some(re) = key {
        if let Some(c) = re.captures(name) {
            let m = c.get(1).or_else(|| c.get(0)).map(|m| m.as_str()).unwrap_or_default();
            return format!("key:{m}");
        }
    }
    names::parse(name).base
}

fn same_shape(a: &Member, b: &Member) -> bool {
    a.block_size.is_some() && a.block_size == b.block_size && a.grid_size == b.grid_size
}

/// Within `pct` percent of each other (both known and positive).
pub fn close(a: Option<f64>, b: Option<f64>, pct: f64) -> bool {
    match (a, b) {
        (Some(x), Some(y)) if x > 0.0 && y > 0.0 => 100.0 * (x - y).abs() / x.max(y) <= pct,
        _ => false,
    }
}

fn same_work(a: &Member, b: &Member) -> bool {
    close(a.work.flops, b.work.flops, thresholds().same_work_pct)
}

/// Connected groups of members with different kernel keys linked as versions (module docs). Only
/// members with the same stem can link, so pairs are looked at within each stem's members, with
/// the counts per file counted once: a batch of thousands of files stays near linear.
fn version_series(members: &[Member], keys: &[String]) -> Vec<Vec<usize>> {
    let stems: Vec<String> = members.iter().map(|m| names::stem(&m.base())).collect();
    // Files by their path's bytes (hashing a `Path` walks its components).
    let mut per_file_stem: HashMap<(&std::ffi::OsStr, &str), usize> = HashMap::new();
    let mut file_top: HashMap<&std::ffi::OsStr, f64> = HashMap::new();
    for (m, stem) in members.iter().zip(&stems) {
        *per_file_stem.entry((m.file.as_os_str(), stem.as_str())).or_default() += 1;
        let top = file_top.entry(m.file.as_os_str()).or_insert(0.0);
        *top = top.max(m.file_share_pct.unwrap_or(0.0));
    }
    let alone_in_file = |i: usize| per_file_stem[&(members[i].file.as_os_str(), stems[i].as_str())] == 1;
    let largest = |i: usize| members[i].file_share_pct.is_some_and(|s| s >= file_top[members[i].file.as_os_str()]);
    let mut by_stem: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, stem) in stems.iter().enumerate().filter(|(_, stem)| stem.len() >= 3) {
        by_stem.entry(stem.as_str()).or_default().push(i);
    }
    let mut parent: Vec<usize> = (0..members.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for same_stem in by_stem.values() {
        for (n, &i) in same_stem.iter().enumerate() {
            for &j in &same_stem[n + 1..] {
                let (a, b) = (&members[i], &members[j]);
                if keys[i] == keys[j] {
                    continue;
                }
                let linked = if a.same_file(b) {
                    same_shape(a, b)
                } else {
                    alone_in_file(i) && alone_in_file(j) && (same_shape(a, b) || same_work(a, b) || (largest(i) && largest(j)))
                };
                if linked {
                    let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                    parent[ri] = rj;
                }
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of_root: HashMap<usize, usize> = HashMap::new();
    for i in 0..members.len() {
        let r = root(&mut parent, i);
        let g = *group_of_root.entry(r).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    groups.retain(|g| g.len() >= 2);
    groups
}

/// What `keet compare` knows of one unmatched kernel group when pairing by role.
#[derive(Debug, Clone)]
pub struct Role {
    pub name: String,
    pub block_size: Option<[u64; 3]>,
    pub grid_size: Option<[u64; 3]>,
    pub total_ns: f64,
    pub flops: Option<f64>,
}

/// Pairs unmatched kernels of two sides by role, most time first. A pair needs two of: the same
/// name stem, the same launch shape (or the same number of threads), the same work (FLOPs), each
/// the largest of its side's unmatched kernels. Returns `(before, after, reason)`.
pub fn pair_by_role(before: &[Role], after: &[Role]) -> Vec<(usize, usize, String)> {
    let largest = |side: &[Role], i: usize| side.iter().all(|r| r.total_ns <= side[i].total_ns);
    let mut order: Vec<usize> = (0..before.len()).collect();
    order.sort_by(|&x, &y| before[y].total_ns.total_cmp(&before[x].total_ns));
    let mut used = vec![false; after.len()];
    let mut out = Vec::new();
    for i in order {
        let b = &before[i];
        let mut best: Option<(usize, Vec<String>)> = None;
        for (j, a) in after.iter().enumerate() {
            if used[j] {
                continue;
            }
            let reasons = role_reasons(b, a, largest(before, i) && largest(after, j));
            if reasons.len() >= 2 && best.as_ref().is_none_or(|(_, r)| reasons.len() > r.len()) {
                best = Some((j, reasons));
            }
        }
        if let Some((j, reasons)) = best {
            used[j] = true;
            out.push((i, j, reasons.join(", ")));
        }
    }
    out
}

fn role_reasons(b: &Role, a: &Role, both_largest: bool) -> Vec<String> {
    let mut reasons = Vec::new();
    let (sb, sa) = (names::stem(&names::parse(&b.name).base), names::stem(&names::parse(&a.name).base));
    if sb == sa && sb.len() >= 3 {
        reasons.push(format!("the same name stem `{sb}`"));
    }
    let threads = |r: &Role| r.grid_size.zip(r.block_size).map(|(g, k)| (g.iter().product::<u64>() * k.iter().product::<u64>()) as f64);
    if b.block_size.is_some() && b.block_size == a.block_size && b.grid_size == a.grid_size {
        reasons.push("the same launch shape".into());
    } else if close(threads(b), threads(a), 0.0) {
        reasons.push(format!("the same number of threads ({})", crate::rules::fmt_num(threads(b).unwrap_or(0.0))));
    }
    if close(b.flops, a.flops, thresholds().same_work_pct) {
        reasons.push(format!("the same work ({} FLOPs)", crate::rules::fmt_num(b.flops.unwrap_or(0.0))));
    }
    if both_largest {
        reasons.push("the most time of the unmatched kernels on each side".into());
    }
    reasons
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A synthetic member: file, kernel name, block, grid, share of its file.
    pub(crate) fn member(file: &str, kernel: &str, block: u64, grid: u64, share: f64) -> Member {
        Member {
            file: std::path::Path::new(file).into(),
            kernel: kernel.into(),
            launch: 0,
            launches: 1,
            value: String::new(),
            gpu: Some("GPU A".into()),
            library: None,
            block_size: Some([block, 1, 1]),
            grid_size: Some([grid, 1, 1]),
            duration_ns: Some(1000.0),
            regime: "latency-bound",
            bound_unit: Some("SM"),
            bound_pct: Some(30.0),
            busiest_unit: Some("SM"),
            busiest_pct: Some(30.0),
            regime_missing: None,
            primary: None,
            primary_estimate_pct: None,
            work: super::super::members::Work { threads: Some((block * grid) as f64), ..Default::default() },
            file_share_pct: Some(share),
            path_values: Default::default(),
            facts: Default::default(),
        }
    }

    #[test]
    fn same_kernel_up_to_template_arguments_and_parameters() {
        let m = vec![
            member("a.ncu-rep", "void gemm<(int)128, 8>(float *)", 256, 64, 70.0),
            member("b.ncu-rep", "void gemm<(int)128, 8, (bool)0>(float *, int)", 256, 64, 70.0),
            member("b.ncu-rep", "void other<1>(float *)", 256, 64, 30.0),
        ];
        let s = sets(&m, None);
        assert_eq!(s, vec![(SetKind::Kernel, vec![0, 1])]);
        // A user key groups names the base name would keep apart.
        let re = regex::Regex::new(r"^void (\w+)<").unwrap();
        let renamed = vec![member("a", "void k_fast<1>()", 32, 1, 50.0), member("b", "void k_fast<2>()", 32, 1, 50.0)];
        assert_eq!(sets(&renamed, Some(&re)).len(), 1);
    }

    #[test]
    fn versions_in_one_file_need_the_same_launch_shape() {
        let m = vec![
            member("t.ncu-rep", "transposeMatrix(float *)", 1024, 32, 25.0),
            member("t.ncu-rep", "transposeMatrixOptimized(float *)", 1024, 32, 25.0),
            member("t.ncu-rep", "transposeMatrixAdvanced(float *)", 1024, 32, 25.0),
            member("t.ncu-rep", "transposeTiny(float *)", 64, 1, 5.0),
            member("t.ncu-rep", "copyRow(float *)", 1024, 32, 20.0),
        ];
        assert_eq!(sets(&m, None), vec![(SetKind::Versions, vec![0, 1, 2])]);
    }

    #[test]
    fn a_librarys_variants_are_its_configurations_not_versions() {
        // cuBLAS picked a split-K and a plain kernel for the same launch shape in one report.
        let library = |kernel: &str| {
            let mut m = member("decode.ncu-rep", kernel, 384, 132, 20.0);
            m.library = Some("cuBLAS".into());
            m
        };
        let both = vec![library("nvjet_tst_64x8_64x16_4x1_v_bz_TNT"), library("nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT")];
        let (kind, idx) = sets(&both, None).pop().expect("one series");
        let set = super::super::describe::describe(kind, idx.iter().map(|&i| both[i].clone()).collect(), &[]);
        assert_eq!(set.varies, vec!["library configuration".to_string()]);
        assert!(
            set.findings.iter().all(|f| f.kind != "left" && f.kind != "step"),
            "no 'what is left in the last version': {:?}",
            set.findings
        );
        // The user's own versions stay versions, with their steps.
        let own = vec![
            member("t.ncu-rep", "transposeMatrix(float *)", 1024, 32, 50.0),
            member("t.ncu-rep", "transposeMatrixTiled(float *)", 1024, 32, 50.0),
        ];
        let (kind, idx) = sets(&own, None).pop().expect("one series");
        let set = super::super::describe::describe(kind, idx.iter().map(|&i| own[i].clone()).collect(), &[]);
        assert_eq!(set.varies, vec!["version".to_string()]);
        assert!(set.findings.iter().any(|f| f.kind == "left"), "{:?}", set.findings);
    }

    #[test]
    fn versions_repeated_across_files_fold_into_one_set() {
        // Every report of a sweep runs both versions at its own block and problem size.
        let sweep = |file: &str, block: u64, grid: u64| {
            vec![member(file, "simpleReduce1(float *)", block, grid, 50.0), member(file, "simpleReduce2(float *)", block, grid, 50.0)]
        };
        let m: Vec<Member> = [sweep("report.ncu-rep", 32, 31251), sweep("report2.ncu-rep", 128, 7813)].concat();
        let found = sets(&m, None);
        assert!(found.contains(&(SetKind::Versions, vec![0, 1, 2, 3])), "one (version x file) set: {found:?}");
        assert_eq!(found.iter().filter(|s| s.0 == SetKind::Versions).count(), 1, "{found:?}");
        // Series sharing a stem but no versions stay apart.
        let other = vec![
            member("a.ncu-rep", "scanA(float *)", 32, 1, 50.0),
            member("a.ncu-rep", "scanB(float *)", 32, 1, 50.0),
            member("b.ncu-rep", "scanC(float *)", 32, 1, 50.0),
            member("b.ncu-rep", "scanD(float *)", 32, 1, 50.0),
        ];
        assert_eq!(sets(&other, None), vec![(SetKind::Versions, vec![0, 1]), (SetKind::Versions, vec![2, 3])]);
    }

    #[test]
    fn versions_across_files_by_role() {
        let m = vec![
            member("naive.ncu-rep", "sgemm_naive(int)", 1024, 4096, 100.0),
            member("coalescing.ncu-rep", "sgemm_global_memory_coalescing(int)", 1024, 4096, 100.0),
            member("tiled.ncu-rep", "sgemm_2d_blocktiling(int)", 64, 1024, 90.0),
            member("tiled.ncu-rep", "warmup(int)", 64, 1, 10.0),
        ];
        assert_eq!(sets(&m, None), vec![(SetKind::Versions, vec![0, 1, 2])]);
    }

    #[test]
    fn renamed_kernels_pair_by_role_with_reasons() {
        let role = |name: &str, block: u64, grid: u64, ns: f64, flops: Option<f64>| Role {
            name: name.into(),
            block_size: Some([block, 1, 1]),
            grid_size: Some([grid, 1, 1]),
            total_ns: ns,
            flops,
        };
        let before = vec![role("sgemm_naive(int)", 1024, 4096, 5e7, Some(1.7e10)), role("fill(int)", 32, 1, 1e3, None)];
        let after = vec![role("copy(int)", 32, 1, 1e3, None), role("sgemm_coalesced(int)", 256, 16384, 2e7, Some(1.7e10))];
        let pairs = pair_by_role(&before, &after);
        // fill -> copy share the launch shape only (neither is its side's largest): not paired.
        assert_eq!(pairs.len(), 1, "{pairs:?}");
        assert_eq!((pairs[0].0, pairs[0].1), (0, 1));
        assert!(pairs[0].2.contains("name stem `sgemm`") && pairs[0].2.contains("same work"), "{}", pairs[0].2);
        // Nothing in common: no pair.
        let lone = vec![role("alpha(int)", 32, 1, 1.0, None)];
        let other = vec![role("omega(int)", 64, 9, 1.0, None), role("big(int)", 8, 8, 9.0, None)];
        assert!(pair_by_role(&lone, &other).is_empty());
    }
}
