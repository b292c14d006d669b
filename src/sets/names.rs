//! Kernel and file names as sets read them: the kernel's base name (no return type, template
//! arguments or parameter list), its template arguments, its name stem (the first word), the
//! version marks in a name, and the part of a file name that differs across a series.

/// A demangled kernel name taken apart: `void gemm<(int)128, 8>(float *, int)` has the base
/// `gemm` and the template arguments `["128", "8"]` (casts dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelName {
    /// Namespaces and the kernel's own name, without return type, template arguments or parameters.
    pub base: String,
    /// Template arguments at the top level, casts like `(int)` dropped; `None` without a template.
    pub template_args: Option<Vec<String>>,
}

/// Splits `full` into its base name and template arguments.
pub fn parse(full: &str) -> KernelName {
    // An anonymous namespace, as the demanglers print it (`<unnamed>` from c++filt and ncu,
    // `(anonymous namespace)` from Clang), is a namespace, not a template or a parameter list.
    let plain = full.replace("<unnamed>::", "").replace("(anonymous namespace)::", "");
    let name = plain.trim();
    let name = name.strip_prefix("void ").unwrap_or(name).trim_start();
    let mut depth = 0usize;
    let mut open: Option<usize> = None;
    let mut close: Option<usize> = None;
    let mut params: Option<usize> = None;
    for (pos, ch) in name.char_indices() {
        match ch {
            '<' => {
                if depth == 0 && open.is_none() {
                    open = Some(pos);
                }
                depth += 1;
            }
            '>' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && open.is_some() && close.is_none() {
                    close = Some(pos);
                }
            }
            '(' if depth == 0 => {
                params = Some(pos);
                break;
            }
            _ => {}
        }
    }
    let end = open.or(params).unwrap_or(name.len());
    let base = name[..end].trim().to_string();
    let template_args = match (open, close) {
        (Some(o), Some(c)) if c > o => Some(split_top_level(&name[o + 1..c]).into_iter().map(|a| drop_casts(&a)).collect()),
        _ => None,
    };
    KernelName { base, template_args }
}

/// Splits at commas outside brackets.
fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut part = String::new();
    for ch in s.chars() {
        match ch {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(part.trim().to_string());
                part.clear();
                continue;
            }
            _ => {}
        }
        part.push(ch);
    }
    if !part.trim().is_empty() {
        out.push(part.trim().to_string());
    }
    out
}

/// `(unsigned int)64` -> `64`: a parenthesised type directly before a literal.
fn drop_casts(arg: &str) -> String {
    let trimmed = arg.trim();
    if let Some(rest) = trimmed.strip_prefix('(') {
        if let Some(close) = rest.find(')') {
            let inner = &rest[..close];
            let after = rest[close + 1..].trim();
            let is_type = !inner.is_empty() && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '_');
            if is_type && !after.is_empty() {
                return after.to_string();
            }
        }
    }
    trimmed.to_string()
}

/// The words of a name, lower-cased: split at `_`, `-`, `.`, `:` and spaces, at a lower-case letter
/// followed by an upper-case one, and between letters and digits (`setRowReadCol2` -> set, row,
/// read, col, 2).
pub fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut prev: Option<char> = None;
    for ch in name.chars() {
        let boundary = match prev {
            None => false,
            Some(p) => {
                !ch.is_alphanumeric()
                    || (p.is_lowercase() && ch.is_uppercase())
                    || (p.is_ascii_digit() != ch.is_ascii_digit() && p.is_alphanumeric())
            }
        };
        if boundary && !word.is_empty() {
            out.push(std::mem::take(&mut word).to_lowercase());
        }
        if ch.is_alphanumeric() {
            word.push(ch);
        }
        prev = Some(ch);
    }
    if !word.is_empty() {
        out.push(word.to_lowercase());
    }
    out
}

/// The name stem of a base name: its namespaces and the first word of its own name
/// (`transposeMatrixOptimized` -> `transpose`, `sgemm_naive` -> `sgemm`, `cutlass::Kernel` ->
/// `cutlass::kernel`). Versions of one kernel share it.
pub fn stem(base: &str) -> String {
    let (namespaces, own) = match base.rfind("::") {
        Some(p) => (&base[..p + 2], &base[p + 2..]),
        None => ("", base),
    };
    let first = words(own).into_iter().next().unwrap_or_default();
    format!("{namespaces}{first}")
}

/// The name a version series goes by: the longest start its members' base names share, cut at a
/// word boundary (`transposeMatrix`, `transposeMatrixOptimized` -> `transposeMatrix`;
/// `simpleReduce1`, `simpleReduce2` -> `simpleReduce`), and at least their common [`stem`].
pub fn series_name(bases: &[String]) -> String {
    let Some(first) = bases.first() else { return String::new() };
    let common = bases
        .iter()
        .skip(1)
        .fold(first.len(), |len, b| first.char_indices().zip(b.chars()).take_while(|((i, x), y)| *i < len && x == y).count().min(len));
    let boundary = |at: usize| {
        bases.iter().all(|b| {
            let (before, after) = (b[..at].chars().next_back(), b[at..].chars().next());
            match (before, after) {
                (Some(p), Some(c)) => {
                    !c.is_alphanumeric() || (p.is_lowercase() && c.is_uppercase()) || (p.is_ascii_digit() != c.is_ascii_digit())
                }
                _ => true,
            }
        })
    };
    let cut = (1..=common)
        .rev()
        .filter(|&at| first.is_char_boundary(at) && bases.iter().all(|b| b.is_char_boundary(at)))
        .find(|&at| boundary(at));
    let name = cut.map(|at| first[..at].trim_end_matches(|c: char| !c.is_alphanumeric()).to_string()).unwrap_or_default();
    let stem = stem(first);
    if name.to_lowercase().len() >= stem.len() && name.to_lowercase().starts_with(&stem.to_lowercase()) {
        name
    } else {
        stem
    }
}

/// The file name without its folder and extension.
pub fn file_stem(path: &std::path::Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The part of each name that differs from the others: the segments (split at `_`, `-`, `.`,
/// spaces) they all start with and all end with are cut (`gemm_v1_alter`, `gemm_v7_alter` ->
/// `v1`, `v7`). A name left empty keeps its whole text.
pub fn differing_parts(names: &[String]) -> Vec<String> {
    let split: Vec<Vec<&str>> = names.iter().map(|n| segments(n)).collect();
    let shortest = split.iter().map(Vec::len).min().unwrap_or(0);
    let common = |pick: &dyn Fn(&Vec<&str>, usize) -> String| {
        (0..shortest).take_while(|&i| split.iter().all(|s| pick(s, i) == pick(&split[0], i))).count()
    };
    let lead = common(&|s, i| s[i].to_string());
    let trail = common(&|s, i| s[s.len() - 1 - i].to_string()).min(shortest.saturating_sub(lead));
    names
        .iter()
        .zip(&split)
        .map(|(name, s)| {
            let middle: String = s[lead..s.len() - trail].concat();
            let middle = middle.trim_matches(|c| c == '_' || c == '-' || c == '.' || c == ' ').to_string();
            if middle.is_empty() {
                name.clone()
            } else {
                middle
            }
        })
        .collect()
}

/// A name cut before each separator, separators kept with the segment they start.
fn segments(name: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (pos, ch) in name.char_indices() {
        if pos > start && matches!(ch, '_' | '-' | '.' | ' ') {
            out.push(&name[start..pos]);
            start = pos;
        }
    }
    out.push(&name[start..]);
    out
}

/// Compares two texts with their digit runs as numbers (`v2` before `v10`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let chunks = |s: &str| -> Vec<(bool, String)> {
        let mut out: Vec<(bool, String)> = Vec::new();
        for ch in s.chars() {
            let digit = ch.is_ascii_digit();
            match out.last_mut() {
                Some((d, text)) if *d == digit => text.push(ch),
                _ => out.push((digit, ch.to_string())),
            }
        }
        out
    };
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let ord = match (x.0, y.0) {
            (true, true) => {
                let nx: u128 = x.1.parse().unwrap_or(u128::MAX);
                let ny: u128 = y.1.parse().unwrap_or(u128::MAX);
                nx.cmp(&ny).then_with(|| x.1.len().cmp(&y.1.len()))
            }
            _ => x.1.cmp(&y.1),
        };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    ca.len().cmp(&cb.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_name_and_template_arguments() {
        let n = parse("void gemm<(int)128, (int)8, (bool)0>(float *, float *, int)");
        assert_eq!(n.base, "gemm");
        assert_eq!(n.template_args, Some(vec!["128".to_string(), "8".into(), "0".into()]));
        let n = parse("transposeMatrix(float *, float *, int, int)");
        assert_eq!((n.base.as_str(), n.template_args), ("transposeMatrix", None));
        let n = parse("void cutlass::Kernel<cutlass_80_simt_sgemm_128x256_8x4_tt_align1>(T1::Params)");
        assert_eq!(n.base, "cutlass::Kernel");
        assert_eq!(n.template_args.unwrap(), vec!["cutlass_80_simt_sgemm_128x256_8x4_tt_align1".to_string()]);
        assert_eq!(parse("ampere_sgemm_64x64_nn").base, "ampere_sgemm_64x64_nn");
        // An anonymous namespace is no template: two unrelated kernels in one must not share a base
        // (h200-moe's arange and QK-norm kernels were once one "set" with an empty name).
        let n = parse("void <unnamed>::fused_qknorm_warp<128, 1, __nv_bfloat16>(<unnamed>::QKNormParams)");
        assert_eq!((n.base.as_str(), n.template_args.unwrap().len()), ("fused_qknorm_warp", 3));
        assert_eq!(parse("void at::native::<unnamed>::distribution_kernel<float>(int)").base, "at::native::distribution_kernel");
        assert_eq!(parse("(anonymous namespace)::scan(int *)").base, "scan");
    }

    #[test]
    fn words_and_stems() {
        assert_eq!(words("setRowReadCol2"), vec!["set", "row", "read", "col", "2"]);
        assert_eq!(words("sgemm_global_memory"), vec!["sgemm", "global", "memory"]);
        assert_eq!(stem("transposeMatrixHighlyOptimized"), "transpose");
        assert_eq!(stem("sgemm_naive"), "sgemm");
        assert_eq!(stem("cutlass::Kernel"), "cutlass::kernel");
    }

    #[test]
    fn a_series_goes_by_the_start_its_names_share() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(series_name(&names(&["transposeMatrix", "transposeMatrixOptimized", "transposeMatrixAdvanced"])), "transposeMatrix");
        assert_eq!(series_name(&names(&["simpleReduce1", "simpleReduce2"])), "simpleReduce");
        assert_eq!(series_name(&names(&["sgemm_naive", "sgemm_global_memory_coalescing"])), "sgemm");
        assert_eq!(series_name(&names(&["setRowReadRow", "setRowReadCol", "setColReadCol"])), "set");
        // No shared word beyond the stem's first word: the stem.
        assert_eq!(series_name(&names(&["transposeA", "transposeAB"])), "transpose");
    }

    #[test]
    fn differing_parts_of_a_series() {
        let names: Vec<String> = ["gemm_v1_alter", "gemm_v1_alter_1", "gemm_v7_alter"].iter().map(|s| s.to_string()).collect();
        assert_eq!(differing_parts(&names), vec!["v1_alter", "v1_alter_1", "v7_alter"]);
        let names: Vec<String> = ["run_N1024_fp32", "run_N2048_fp32"].iter().map(|s| s.to_string()).collect();
        assert_eq!(differing_parts(&names), vec!["N1024", "N2048"]);
        let same = vec!["a".to_string(), "a".to_string()];
        assert_eq!(differing_parts(&same), vec!["a", "a"]);
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["v10", "v2", "v1_alter_1", "v1_alter"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["v1_alter", "v1_alter_1", "v2", "v10"]);
    }
}
