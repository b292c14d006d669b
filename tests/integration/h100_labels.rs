//! The labelled H100 fixture suite: `fixtures/kernels/*.cu` (pairs of CUDA kernels, one with a
//! known performance problem, one without) and `fixtures/h100/labels.toml` (what each must show).
//!
//! * `labels_file_is_valid` and `fact_expressions_evaluate` run everywhere: they check the labels
//!   file against the kernel sources (no GPU, no profiles needed).
//! * `h100_profiles_show_labelled_problems` is ignored until `fixtures/h100/` holds the profiles
//!   written by `scripts/profile-h100.sh` on an H100; run it with
//!   `cargo test --test integration h100_labels -- --ignored`. It reads every profile with keet's ingest,
//!   checks each label's facts against the measured metrics, and checks that the rule layer names
//!   the labelled primary problem and that the twin does not show it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The closed category list (the rule layer's `Category` names, kebab-case), plus "none" for twins.
const CATEGORIES: &[&str] = &[
    "memory-coalescing",
    "shared-bank-conflicts",
    "divergence",
    "occupancy-registers",
    "occupancy-shared-memory",
    "grid-too-small",
    "block-size",
    "compute-bound",
    "memory-bound",
    "latency-bound",
    "atomics-contention",
    "fp64",
    "tensor-core-unused",
    "none",
];

/// The rule layer, behind the two calls this test needs. ADAPT HERE if `keet::facts` /
/// `keet::rules` change: everything else in this file only sees category names.
mod rule_layer {
    use keet::profile::Launch;

    /// The rule layer's findings for one launch, as kebab-case category names, primary first.
    pub fn categories(launch: &Launch) -> Vec<String> {
        let facts = keet::rules::derive_facts(launch);
        keet::rules::evaluate(&facts).iter().map(|f| f.category.as_str().to_string()).collect()
    }

    /// Whether the rule layer knows a category name (every label category but "none" must).
    pub fn knows(category: &str) -> bool {
        keet::rules::Category::parse(category).is_some()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Labels {
    schema: u32,
    kernel: Vec<Label>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Label {
    name: String,
    program: String,
    category: String,
    twin: String,
    why: String,
    facts: Vec<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load_labels() -> Labels {
    let path = root().join("fixtures/h100/labels.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// Fact expressions: `EXPR OP EXPR` over metric names, numbers, + - * / % and parentheses.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Num(f64),
    /// Alternatives (first present wins), and whether it reads the twin's profile.
    Metric {
        names: Vec<String>,
        twin: bool,
    },
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

#[derive(Debug, Clone, PartialEq)]
struct Fact {
    lhs: Expr,
    cmp: Cmp,
    rhs: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Op(char),
    Cmp(Cmp),
    LParen,
    RParen,
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && i + 1 < b.len() && (b[i + 1] as char).is_ascii_digit()) {
            let start = i;
            while i < b.len()
                && ((b[i] as char).is_ascii_alphanumeric()
                    || b[i] == b'.'
                    || ((b[i] == b'+' || b[i] == b'-') && (b[i - 1] == b'e' || b[i - 1] == b'E')))
            {
                i += 1;
            }
            let text = &s[start..i];
            out.push(Tok::Num(text.parse().map_err(|_| format!("bad number '{text}'"))?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.' || b[i] == b'|') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else {
            let two = if i + 1 < b.len() { &s[i..i + 2] } else { "" };
            let (tok, len) = match (c, two) {
                (_, ">=") => (Tok::Cmp(Cmp::Ge), 2),
                (_, "<=") => (Tok::Cmp(Cmp::Le), 2),
                (_, "==") => (Tok::Cmp(Cmp::Eq), 2),
                (_, "!=") => (Tok::Cmp(Cmp::Ne), 2),
                ('>', _) => (Tok::Cmp(Cmp::Gt), 1),
                ('<', _) => (Tok::Cmp(Cmp::Lt), 1),
                ('+' | '-' | '*' | '/' | '%', _) => (Tok::Op(c), 1),
                ('(', _) => (Tok::LParen, 1),
                (')', _) => (Tok::RParen, 1),
                _ => return Err(format!("unexpected character '{c}' at {i}")),
            };
            out.push(tok);
            i += len;
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn expr(&mut self) -> Result<Expr, String> {
        let mut lhs = self.term()?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(self.term()?));
        }
        Ok(lhs)
    }
    fn term(&mut self) -> Result<Expr, String> {
        let mut lhs = self.factor()?;
        while let Some(Tok::Op(op @ ('*' | '/' | '%'))) = self.peek().cloned() {
            self.pos += 1;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(self.factor()?));
        }
        Ok(lhs)
    }
    fn factor(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Tok::Num(v)) => Ok(Expr::Num(v)),
            Some(Tok::Op('-')) => Ok(Expr::Neg(Box::new(self.factor()?))),
            Some(Tok::LParen) => {
                let e = self.expr()?;
                match self.next() {
                    Some(Tok::RParen) => Ok(e),
                    other => Err(format!("expected ')', found {other:?}")),
                }
            }
            Some(Tok::Ident(id)) => {
                let (twin, rest) = match id.strip_prefix("twin.") {
                    Some(r) => (true, r),
                    None => (false, id.as_str()),
                };
                let names: Vec<String> = rest.split('|').map(str::to_string).collect();
                for n in &names {
                    // ncu metric names: `unit__counter[.rollup[.submetric]]`, lowercase
                    let ok = n.contains("__")
                        && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
                        && !n.ends_with('.');
                    if !ok {
                        return Err(format!("'{n}' does not look like an ncu metric name"));
                    }
                }
                Ok(Expr::Metric { names, twin })
            }
            other => Err(format!("expected a number, metric or '(', found {other:?}")),
        }
    }
}

fn parse_fact(s: &str) -> Result<Fact, String> {
    let toks = tokenize(s)?;
    let cmps: Vec<usize> = toks.iter().enumerate().filter(|(_, t)| matches!(t, Tok::Cmp(_))).map(|(i, _)| i).collect();
    if cmps.len() != 1 {
        return Err(format!("needs exactly one comparison (> >= < <= == !=), found {}", cmps.len()));
    }
    let at = cmps[0];
    let cmp = match toks[at] {
        Tok::Cmp(c) => c,
        _ => unreachable!(),
    };
    let side = |toks: &[Tok]| -> Result<Expr, String> {
        let mut p = Parser { toks: toks.to_vec(), pos: 0 };
        let e = p.expr()?;
        if p.pos != p.toks.len() {
            return Err(format!("unexpected {:?}", p.toks[p.pos]));
        }
        Ok(e)
    };
    Ok(Fact { lhs: side(&toks[..at])?, cmp, rhs: side(&toks[at + 1..])? })
}

fn metric_names(e: &Expr, out: &mut Vec<(String, bool)>) {
    match e {
        Expr::Num(_) => {}
        Expr::Metric { names, twin } => out.extend(names.iter().map(|n| (n.clone(), *twin))),
        Expr::Neg(x) => metric_names(x, out),
        Expr::Bin(_, a, b) => {
            metric_names(a, out);
            metric_names(b, out);
        }
    }
}

/// Looks up a metric value; `twin` selects the twin kernel's metrics.
type Lookup<'a> = dyn Fn(&str, bool) -> Option<f64> + 'a;

fn eval(e: &Expr, get: &Lookup) -> Result<f64, String> {
    Ok(match e {
        Expr::Num(v) => *v,
        Expr::Metric { names, twin } => names
            .iter()
            .find_map(|n| get(n, *twin))
            .ok_or_else(|| format!("{}{} not in the profile", if *twin { "twin." } else { "" }, names.join("|")))?,
        Expr::Neg(x) => -eval(x, get)?,
        Expr::Bin(op, a, b) => {
            let (a, b) = (eval(a, get)?, eval(b, get)?);
            match op {
                '+' => a + b,
                '-' => a - b,
                '*' => a * b,
                '/' => a / b,
                '%' => a % b,
                _ => unreachable!(),
            }
        }
    })
}

/// Evaluates a fact: Ok((holds, lhs, rhs)), or Err when a metric is missing.
fn check_fact(f: &Fact, get: &Lookup) -> Result<(bool, f64, f64), String> {
    let (l, r) = (eval(&f.lhs, get)?, eval(&f.rhs, get)?);
    let holds = match f.cmp {
        Cmp::Gt => l > r,
        Cmp::Ge => l >= r,
        Cmp::Lt => l < r,
        Cmp::Le => l <= r,
        Cmp::Eq => l == r,
        Cmp::Ne => l != r,
    };
    Ok((holds, l, r))
}

// ---------------------------------------------------------------------------------------------
// Kernel sources
// ---------------------------------------------------------------------------------------------

/// The `__global__` function names defined in a CUDA source (comments stripped, `__launch_bounds__(..)` skipped).
fn global_kernels(src: &str) -> BTreeSet<String> {
    let mut code = String::with_capacity(src.len());
    for line in src.lines() {
        code.push_str(line.split("//").next().unwrap_or(""));
        code.push('\n');
    }
    while let Some(at) = code.find("__launch_bounds__(") {
        let close = code[at..].find(')').map(|c| at + c + 1).unwrap_or(code.len());
        code.replace_range(at..close, " ");
    }
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("__global__") {
        let rest = &code[at..];
        if let Some(paren) = rest.find('(') {
            if let Some(name) = rest[..paren].split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).rfind(|s| !s.is_empty()) {
                out.insert(name.to_string());
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Tests that run everywhere
// ---------------------------------------------------------------------------------------------

#[test]
fn labels_file_is_valid() {
    let labels = load_labels();
    assert_eq!(labels.schema, 1, "labels.toml: unknown schema");
    let mut errors = Vec::new();
    let by_name: HashMap<&str, &Label> = labels.kernel.iter().map(|k| (k.name.as_str(), k)).collect();
    if by_name.len() != labels.kernel.len() {
        errors.push("kernel names are not unique".to_string());
    }
    let mut programs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for k in &labels.kernel {
        let e = |msg: String| format!("{}: {msg}", k.name);
        programs.entry(&k.program).or_default().push(&k.name);
        if k.name.is_empty() || !k.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            errors.push(e("name must be a lowercase C identifier (it is also a file name)".into()));
        }
        if !CATEGORIES.contains(&k.category.as_str()) {
            errors.push(e(format!("category '{}' is not in the closed list {CATEGORIES:?}", k.category)));
        }
        if k.why.trim().is_empty() {
            errors.push(e("empty 'why'".into()));
        }
        // the program exists, defines the kernel and can launch it by name
        let src_path = root().join("fixtures/kernels").join(format!("{}.cu", k.program));
        match std::fs::read_to_string(&src_path) {
            Err(err) => errors.push(e(format!("{}: {err}", src_path.display()))),
            Ok(src) => {
                if !global_kernels(&src).contains(&k.name) {
                    errors.push(e(format!("{} defines no __global__ {}", src_path.display(), k.name)));
                }
                if !src.contains(&format!("\"{}\"", k.name)) {
                    errors.push(e(format!("{} never names \"{}\" (kernels[] / wanted())", src_path.display(), k.name)));
                }
            }
        }
        // the twin: exists, points back, same program, and at least one of the pair has a problem
        match by_name.get(k.twin.as_str()) {
            None => errors.push(e(format!("twin '{}' has no entry", k.twin))),
            Some(t) => {
                if t.name == k.name {
                    errors.push(e("is its own twin".into()));
                }
                if t.twin != k.name {
                    errors.push(e(format!("twin '{}' names '{}' as its twin, not this kernel", t.name, t.twin)));
                }
                if t.program != k.program {
                    errors.push(e(format!("twin '{}' is in program '{}', not '{}'", t.name, t.program, k.program)));
                }
                if k.category == "none" && t.category == "none" {
                    errors.push(e("neither kernel of the pair has a problem category".into()));
                }
                if k.category != "none" && k.category == t.category {
                    errors.push(e("the twin has the same problem category".into()));
                }
            }
        }
        // facts parse, name plausible metrics, and a problem kernel has at least one own-metric fact
        if k.facts.is_empty() {
            errors.push(e("no facts".into()));
        }
        let mut own_metric = false;
        for fact in &k.facts {
            match parse_fact(fact) {
                Err(msg) => errors.push(e(format!("fact '{fact}': {msg}"))),
                Ok(f) => {
                    let mut names = Vec::new();
                    metric_names(&f.lhs, &mut names);
                    metric_names(&f.rhs, &mut names);
                    if names.is_empty() {
                        errors.push(e(format!("fact '{fact}' reads no metric")));
                    }
                    own_metric |= names.iter().any(|(_, twin)| !twin);
                }
            }
        }
        if !own_metric {
            errors.push(e("no fact reads this kernel's own metrics".into()));
        }
    }
    // every kernel of every program is labelled, and programs are pairs
    for (program, names) in &programs {
        let path = root().join("fixtures/kernels").join(format!("{program}.cu"));
        if let Ok(src) = std::fs::read_to_string(&path) {
            let defined = global_kernels(&src);
            let labelled: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
            for missing in defined.difference(&labelled) {
                errors.push(format!("{}: __global__ {missing} has no label", path.display()));
            }
        }
        if names.len() != 2 {
            errors.push(format!("program {program} has {} labelled kernels, expected a pair", names.len()));
        }
    }
    // every CUDA program in fixtures/kernels is labelled
    let dir = root().join("fixtures/kernels");
    for entry in std::fs::read_dir(&dir).expect("fixtures/kernels") {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) == Some("cu") {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            if !programs.contains_key(stem.as_str()) {
                errors.push(format!("{}: program without labels", p.display()));
            }
        }
    }
    assert!(errors.is_empty(), "labels.toml has {} problem(s):\n  {}", errors.len(), errors.join("\n  "));
}

#[test]
fn label_categories_are_rule_layer_categories() {
    for c in CATEGORIES.iter().filter(|c| **c != "none") {
        assert!(rule_layer::knows(c), "the rule layer has no category '{c}'");
    }
}

#[test]
fn fact_expressions_evaluate() {
    let own: HashMap<&str, f64> = [("a__x.sum", 32.0), ("a__y.sum", 4.0), ("launch__block_size", 40.0)].into_iter().collect();
    let twin: HashMap<&str, f64> = [("a__x.sum", 8.0)].into_iter().collect();
    let get = |n: &str, t: bool| if t { twin.get(n).copied() } else { own.get(n).copied() };
    let ok = |s: &str| check_fact(&parse_fact(s).unwrap(), &get).unwrap().0;
    assert!(ok("a__x.sum / a__y.sum > 7.5"));
    assert!(!ok("a__x.sum / a__y.sum > 8"));
    assert!(ok("a__x.sum / a__y.sum >= 8"));
    assert!(ok("a__x.sum > 3 * twin.a__x.sum"));
    assert!(ok("(a__x.sum - a__y.sum) * 2 == 56"));
    assert!(ok("launch__block_size % 32 != 0"));
    assert!(ok("-a__y.sum < 0"));
    assert!(ok("a__missing.sum|a__y.sum == 4"), "alternatives: first present");
    assert!(ok("1e3 > 999.5"));
    assert!(check_fact(&parse_fact("a__missing.sum > 1").unwrap(), &get).is_err(), "a missing metric is an error, not false");
    for bad in ["a__x.sum", "a__x.sum > 1 > 2", "a__x.sum > (1", "x > 1", "a__x.sum > 1 $", "a__x.sum >"] {
        assert!(parse_fact(bad).is_err(), "should not parse: {bad}");
    }
    let src = "// __global__ void commented(int)\n__global__ void __launch_bounds__(256, 1)\nfoo_bar(int a) {}\n__global__ void baz(){}";
    assert_eq!(global_kernels(src), ["baz", "foo_bar"].iter().map(|s| s.to_string()).collect());
}

// ---------------------------------------------------------------------------------------------
// Needs the H100 profiles
// ---------------------------------------------------------------------------------------------

/// The per-kernel files scripts/profile-h100.sh writes, in the order they are checked.
const PROFILE_FILES: &[(&str, bool)] = &[
    // (suffix, carries the full raw metric set: facts and rules are checked on it)
    (".ncu-rep", true),
    (".raw.csv", true),
    (".details.csv", false),
    (".source-sass.csv", false),
    (".source-cuda-sass.csv", false),
];

fn launch_matches(l: &keet::profile::Launch, kernel: &str) -> bool {
    let base = l.name.split(['(', '<']).next().unwrap_or("").trim();
    let base = base.rsplit("::").next().unwrap_or(base).rsplit(' ').next().unwrap_or(base);
    base == kernel || l.mangled_name.as_deref().is_some_and(|m| m.contains(kernel))
}

#[test]
#[ignore = "recorded on an H200 (fixtures/h100/README.md): 14 of 15 primaries right; the pointer-chase twins do not separate and block-size is capped by the scorer's table"]
fn h100_profiles_show_labelled_problems() {
    let labels = load_labels();
    let dir = root().join("fixtures/h100");
    let by_name: HashMap<&str, &Label> = labels.kernel.iter().map(|k| (k.name.as_str(), k)).collect();
    let mut failures: Vec<String> = Vec::new();
    let mut missing: Vec<&str> = Vec::new();
    let mut report: Vec<String> = Vec::new();

    // Read every present profile file once: (kernel, suffix) -> launch
    let mut launches: HashMap<(String, &str), keet::profile::Launch> = HashMap::new();
    for k in &labels.kernel {
        let mut any = false;
        for (suffix, _) in PROFILE_FILES {
            let path = dir.join(format!("{}{}", k.name, suffix));
            if !path.exists() {
                continue;
            }
            any = true;
            match keet::profile::read_path(&path) {
                Err(e) => failures.push(format!("{}: keet cannot read it: {e}", rel(&path))),
                Ok(p) => {
                    // One launch per file by construction; a page without kernel names (some source
                    // views) is accepted when it holds a single launch.
                    let matching: Vec<_> = if p.launches.len() == 1 {
                        p.launches
                    } else {
                        p.launches.into_iter().filter(|l| launch_matches(l, &k.name)).collect()
                    };
                    match matching.len() {
                        1 => {
                            launches.insert((k.name.clone(), suffix), matching.into_iter().next().unwrap());
                        }
                        n => failures.push(format!("{}: {n} launches of {} (expected exactly 1)", rel(&path), k.name)),
                    }
                }
            }
        }
        if !any {
            missing.push(&k.name);
        }
    }
    assert!(
        missing.len() < labels.kernel.len(),
        "no profiles in {}: run scripts/profile-h100.sh on an H100 first (see fixtures/h100/README.md)",
        rel(&dir)
    );

    for k in &labels.kernel {
        let twin = by_name[k.twin.as_str()];
        for (suffix, _) in PROFILE_FILES.iter().filter(|(_, full)| *full) {
            let Some(launch) = launches.get(&(k.name.clone(), *suffix)) else { continue };
            let twin_launch = launches.get(&(twin.name.clone(), *suffix));
            let get = |name: &str, is_twin: bool| -> Option<f64> {
                let l = if is_twin { twin_launch? } else { launch };
                l.metrics.get(name).and_then(|m| m.as_f64())
            };
            let what = format!("{}{}", k.name, suffix);
            // 1. the profile shows what the kernel was built to show
            for fact in &k.facts {
                let f = parse_fact(fact).expect("labels_file_is_valid checks that facts parse");
                match check_fact(&f, &get) {
                    Ok((true, l, r)) => report.push(format!("ok    {what}: {fact}  ({l:.4} vs {r:.4})")),
                    Ok((false, l, r)) => failures.push(format!("{what}: fact does not hold: {fact}  ({l:.4} vs {r:.4})")),
                    Err(msg) => failures.push(format!("{what}: fact '{fact}': {msg}")),
                }
            }
            // 2. the rule layer names the labelled primary problem, and the twin does not show it
            let cats = rule_layer::categories(launch);
            report.push(format!("rules {what}: {cats:?}"));
            if k.category != "none" {
                match cats.first() {
                    Some(primary) if *primary == k.category => {}
                    other => failures.push(format!("{what}: primary finding {other:?}, labelled {} (all: {cats:?})", k.category)),
                }
            }
            if twin.category != "none" && twin.category != k.category && cats.contains(&twin.category) {
                failures.push(format!("{what}: shows its twin's problem {} (all: {cats:?})", twin.category));
            }
        }
    }

    println!("{}", report.join("\n"));
    if !missing.is_empty() {
        println!("kernels without profiles (not checked): {}", missing.join(", "));
    }
    assert!(failures.is_empty(), "{} failure(s):\n  {}", failures.len(), failures.join("\n  "));
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}
