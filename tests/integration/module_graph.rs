//! The module graph of keet's sources: every `crate::`/`super::`/`self::` path in `src/` and in the engine crate `crates/keet-llm/src` (in `use`
//! declarations and inline), resolved to the module (file) it names. Data flows one way, so no
//! module may import one that imports it back; this test finds the circles (strongly connected
//! components of more than one module) and fails on any that is not in [`KNOWN_CIRCLES`], and on
//! any entry there that is gone (so the list only shrinks).
//!
//! A module's use of its own ancestors (`super::Thing`, a type its parent module owns) is not an
//! edge: a child is part of its parent. Comments are skipped (doc links are not imports).
//!
//! `cargo test --test integration module_graph -- --nocapture` prints the circles with the edges that close them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles that remain, each as its sorted module list: none. Only remove entries.
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Circles inside the engine crate (`crates/keet-llm`). Only remove entries.
const KNOWN_ENGINE_CIRCLES: &[&[&str]] = &[];

/// Module path (`render::explain`) of a file under `src/`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without comments, strings and char literals (each replaced by a space).
fn code_only(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if b[i] == b'r'
            && (b[i..].starts_with(b"r#") || b[i..].starts_with(b"r\""))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // Raw string r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = (j + close.len()).min(b.len());
                out.push(' ');
            } else {
                out.push('r');
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('a', '\n', '\''); lifetimes ('a) are left alone.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else {
            let c = s[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path of two or more segments in `code` (`a::b`, `crate::x::y`), with `use` groups
/// expanded: `use crate::render::{self, explain::wrap}` gives `crate::render::self` and
/// `crate::render::explain::wrap`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < chars.len() {
        let starts_word =
            (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':')) && (chars[i].is_ascii_alphabetic() || chars[i] == '_');
        if starts_word {
            let before = out.len();
            i = path_at(&chars, i, vec![], &mut out);
            if out.len() > before && out[before].len() == 1 {
                out.truncate(before);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Reads a path (and any `{...}` group after `::`) starting at `i` under `prefix`; returns the
/// index after it.
fn path_at(chars: &[char], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segs = prefix;
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '{' {
            i += 1;
            loop {
                while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
                    i += 1;
                }
                if i >= chars.len() || chars[i] == '}' {
                    return i + 1;
                }
                let before = i;
                i = path_at(chars, i, segs.clone(), out);
                if i == before {
                    i += 1;
                }
            }
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        if i == start {
            break;
        }
        segs.push(chars[start..i].iter().collect());
        let mut j = i;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
            i = j + 2;
        } else {
            break;
        }
    }
    if !segs.is_empty() {
        out.push(segs);
    }
    i
}

/// The module a path names: `crate`/`super`/`self` resolved against `from`, then the longest
/// prefix that is a module of the crate.
fn resolve(from: &str, path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    let mut base: Vec<String> = if from.is_empty() { vec![] } else { from.split("::").map(String::from).collect() };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") | Some("super") => {
            // In `a/b.rs` (module a::b) `super` is `a`; `self` is `a::b`.
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "self" => rest = &rest[1..],
                    "super" => {
                        base.pop()?;
                        rest = &rest[1..];
                    }
                    _ => break,
                }
            }
        }
        _ => return None,
    }
    let mut best = base.join("::");
    let mut cur = base;
    for seg in rest {
        cur.push(seg.clone());
        let name = cur.join("::");
        if modules.contains(&name) {
            best = name;
        } else {
            break;
        }
    }
    Some(best)
}

fn is_ancestor_or_self(anc: &str, module: &str) -> bool {
    anc.is_empty() || anc == module || module.starts_with(&format!("{anc}::"))
}

/// module -> modules it imports (ancestors left out), for the crate whose sources are in `src`
/// (relative to the workspace root).
fn graph(src: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    let mut files = vec![];
    rust_files(&src, &mut files);
    files.retain(|f| f.file_name().is_some_and(|n| n != "main.rs"));
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let m = module_of(&src, f);
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        let all = paths(&code);
        // Names a `use` brought into scope for a module (`use crate::render::{self, ..}` → `render`).
        let mut aliases: BTreeMap<String, String> = BTreeMap::new();
        for p in &all {
            let written: Vec<String> = p.iter().filter(|s| *s != "self" || p.len() == 1).cloned().collect();
            if let (Some(to), Some(last)) = (resolve(&m, &written, &modules), written.last()) {
                if to.rsplit("::").next() == Some(last.as_str()) && to.split("::").count() + 1 >= written.len() {
                    aliases.insert(last.clone(), to);
                }
            }
        }
        let deps = g.entry(m.clone()).or_default();
        for p in &all {
            let to = match p[0].as_str() {
                "crate" | "super" | "self" => resolve(&m, p, &modules),
                first => {
                    // A module in scope: an alias from a `use`, or a child module of this one.
                    let child = if m.is_empty() { first.to_string() } else { format!("{m}::{first}") };
                    let base = aliases.get(first).cloned().or_else(|| modules.contains(&child).then_some(child));
                    base.and_then(|b| {
                        let mut abs: Vec<String> = vec!["crate".into()];
                        abs.extend(b.split("::").map(String::from));
                        abs.extend(p[1..].iter().cloned());
                        resolve(&m, &abs, &modules)
                    })
                }
            };
            if let Some(to) = to {
                if !is_ancestor_or_self(&to, &m) {
                    deps.insert(to);
                }
            }
        }
    }
    g
}

/// Strongly connected components with more than one module (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let g = s.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = vec![];
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State { g, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on_stack: BTreeSet::new(), next: 0, out: vec![] };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    check_circles("src", KNOWN_CIRCLES);
}

#[test]
fn no_engine_module_imports_one_that_imports_it_back() {
    check_circles("crates/keet-llm/src", KNOWN_ENGINE_CIRCLES);
    // The engine is parsed, not skipped: its loader dispatches to the fast engine.
    assert!(graph("crates/keet-llm/src")["loader"].contains("fast"));
}

fn check_circles(src: &str, known: &[&[&str]]) {
    let g = graph(src);
    let found = circles(&g);
    let known: Vec<Vec<String>> = known.iter().map(|c| c.iter().map(|s| s.to_string()).collect()).collect();
    let mut report = String::new();
    for c in &found {
        report += &format!("circle: {}\n", c.join(", "));
        for a in c {
            for b in g[a].iter().filter(|b| c.contains(b)) {
                report += &format!("  {a} -> {b}\n");
            }
        }
    }
    eprint!("{report}");
    let new: Vec<_> = found.iter().filter(|c| !known.contains(c)).collect();
    let gone: Vec<_> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(new.is_empty(), "new import circles (a module imports one that imports it back):\n{report}");
    assert!(gone.is_empty(), "circles resolved: remove them from KNOWN_CIRCLES: {gone:?}");
}

#[test]
fn the_parser_sees_groups_and_skips_comments() {
    let code = code_only("use crate::render::{self, explain::{wrap, md_cell}};\n// crate::cache::x\nlet s = \"crate::eval\"; super::llm::Engine::load(); let x = 'a'; fn f<'a>(v: &'a str) {}");
    let p = paths(&code);
    let joined: Vec<String> = p.iter().map(|s| s.join("::")).collect();
    assert_eq!(
        joined,
        ["crate::render::self", "crate::render::explain::wrap", "crate::render::explain::md_cell", "super::llm::Engine::load"]
    );
    let modules: BTreeSet<String> = ["render", "render::explain", "cli", "cli::bench", "llm"].iter().map(|s| s.to_string()).collect();
    assert_eq!(resolve("cli::bench", &p[3], &modules).as_deref(), Some("cli"));
    assert_eq!(resolve("cli", &["super".into(), "llm".into(), "Engine".into()], &modules).as_deref(), Some("llm"));
    assert_eq!(resolve("x", &p[1], &modules).as_deref(), Some("render::explain"));
    assert!(
        circles(&BTreeMap::from([("a".into(), BTreeSet::from(["b".into()])), ("b".into(), BTreeSet::from(["a".into()]))]))
            == vec![vec!["a".to_string(), "b".to_string()]]
    );
}
