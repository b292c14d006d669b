//! The factors two members of a set differ in (module docs of [`super::describe`]), over one
//! set's members: what describing the set and computing its findings both read.

use super::group::{close, SetKind};
use super::members::Member;
use super::{names, thresholds, version_mark};

/// What is known of the set while it is described.
pub struct View<'a> {
    pub kind: SetKind,
    pub members: &'a [Member],
    /// Each member's part of its file name that differs from the others'.
    pub file_values: Vec<String>,
    /// Some file name carries a version mark.
    pub marks: bool,
    /// A version series whose versions repeat across files (a version x file set): two members
    /// differ in the version and in whatever else differs between their launches.
    pub folded: bool,
    pub vary_keys: &'a [String],
    /// Each member's base name and template arguments, parsed once (a set of thousands of members
    /// compares every pair).
    pub bases: Vec<String>,
    pub template_args: Vec<Option<Vec<String>>>,
}

impl<'a> View<'a> {
    pub fn new(kind: SetKind, members: &'a [Member], vary_keys: &'a [String]) -> View<'a> {
        let stems: Vec<String> = members.iter().map(|m| names::file_stem(&m.file)).collect();
        let marks = stems.iter().any(|s| version_mark().is_match(s));
        let mut view = View::ordered(kind, members, names::differing_parts(&stems), marks, false, vary_keys);
        view.folded = kind == SetKind::Versions && folds(members, &view.bases);
        view
    }

    /// The view of members already ordered, with their file values in that order.
    pub fn ordered(
        kind: SetKind,
        members: &'a [Member],
        file_values: Vec<String>,
        marks: bool,
        folded: bool,
        vary_keys: &'a [String],
    ) -> View<'a> {
        let parsed: Vec<names::KernelName> = members.iter().map(|m| names::parse(&m.kernel)).collect();
        let template_args = parsed.iter().map(|p| p.template_args.clone()).collect();
        let bases = parsed.into_iter().map(|p| p.base).collect();
        View { kind, members, file_values, marks, folded, vary_keys, bases, template_args }
    }

    /// What differs between members `i` and `j` (module docs).
    pub fn differences(&self, i: usize, j: usize) -> Vec<String> {
        let (a, b) = (&self.members[i], &self.members[j]);
        let mut out: Vec<String> = Vec::new();
        if a.gpu != b.gpu {
            out.push("gpu".into());
        }
        let keys: Vec<&String> = self.vary_keys.iter().filter(|k| a.path_values.get(*k) != b.path_values.get(*k)).collect();
        let (ta, tb) = (&self.template_args[i], &self.template_args[j]);
        let arity = |t: &Option<Vec<String>>| t.as_ref().map(Vec::len);
        let version = match self.kind {
            SetKind::Versions => self.bases[i] != self.bases[j],
            SetKind::Kernel => (self.marks && !a.same_file(b) && self.file_values[i] != self.file_values[j]) || arity(ta) != arity(tb),
        };
        if version && self.kind == SetKind::Versions && a.library.is_some() && b.library.is_some() {
            // Two kernels a library chose (cuBLAS's split-K and non-split-K variants, say): the
            // user picks among them through shapes and the library's settings, not by editing.
            out.push("library configuration".into());
        } else if version {
            out.push("version".into());
        }
        // In a version x file set the launch shape and size are factors of their own.
        if (!version || self.folded) && keys.is_empty() {
            if !version && ta != tb {
                out.push("template parameters".into());
            }
            let same_threads = close(a.threads(), b.threads(), thresholds().same_threads_pct);
            if a.block_size != b.block_size || (a.grid_size != b.grid_size && same_threads) {
                out.push("launch shape".into());
            }
            if !same_threads && a.threads().is_some() && b.threads().is_some() {
                out.push("problem size".into());
            }
        }
        out.extend(keys.into_iter().cloned());
        if out.is_empty() && !a.same_file(b) {
            out.push("run".into());
        }
        out
    }
}

/// Some base name occurs in two files: a version series whose versions repeat across files.
fn folds(members: &[Member], bases: &[String]) -> bool {
    let mut first_of: std::collections::HashMap<&str, &Member> = std::collections::HashMap::new();
    members.iter().zip(bases).any(|(m, base)| match first_of.get(base.as_str()) {
        Some(first) => !first.same_file(m),
        None => {
            first_of.insert(base, m);
            false
        }
    })
}
