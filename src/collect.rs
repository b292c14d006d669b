//! What to collect next: the `ncu` command line that profiles one kernel again with the sections
//! its diagnosis says are missing ([`crate::rules::Diagnosis::missing`]). keet never guesses a
//! fact it has not measured; this turns "missing: ..." into a command a user or an agent can run.

use crate::analysis::LaunchAnalysis;
use serde::Serialize;

/// The plan for one kernel: what is missing, the command that collects it, and what else to do
/// (a compiler flag) that is not an `ncu` option.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectPlan {
    /// The kernel's (demangled) name as the profile spells it.
    pub kernel: String,
    /// What the profile lacks for this kernel, each with the `ncu` option that collects it.
    pub missing: Vec<MissingSection>,
    /// `ncu ...` for this kernel alone; `None` when nothing keet uses is missing.
    pub command: Option<String>,
    /// Steps outside `ncu`'s options (e.g. compile with `-lineinfo`).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissingSection {
    pub what: String,
    pub ncu_option: String,
}

/// What the application placeholder reads when no command line is given.
pub const APPLICATION_PLACEHOLDER: &str = "<application> [arguments]";

/// The plan for `launch`: its diagnosis's missing sections as one `ncu` command that profiles
/// this kernel once (matched by its mangled name where the profile has it, else by its exact
/// demangled name), writing `output` (a report name without `.ncu-rep`). `application` is the
/// program and its arguments as the user runs it ([`APPLICATION_PLACEHOLDER`] when `None`).
pub fn plan(launch: &LaunchAnalysis, application: Option<&str>, output: &str) -> CollectPlan {
    let missing: Vec<MissingSection> = launch
        .diagnosis
        .missing
        .iter()
        .map(|m| MissingSection { what: m.what.to_string(), ncu_option: m.ncu_option.to_string() })
        .collect();
    let mut options: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for m in &missing {
        // "--section SourceCounters --import-source yes (compile with -lineinfo)": options, then a note.
        let (opts, note) = match m.ncu_option.split_once(" (") {
            Some((o, n)) => (o, Some(n.trim_end_matches(')'))),
            None => (m.ncu_option.as_str(), None),
        };
        let words: Vec<&str> = opts.split_whitespace().collect();
        for pair in words.chunks(2) {
            let option = pair.join(" ");
            if !options.contains(&option) {
                options.push(option);
            }
        }
        if let Some(n) = note {
            let n = n.to_string();
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    let command = (!options.is_empty()).then(|| {
        let filter = match &launch.mangled_name {
            Some(m) if !m.is_empty() => format!("--kernel-name-base mangled --kernel-name {}", shell_quote(m)),
            _ => format!("--kernel-name-base demangled --kernel-name {}", shell_quote(&launch.name)),
        };
        format!(
            "ncu {} {filter} --launch-count 1 -o {} {}",
            options.join(" "),
            shell_quote(output),
            application.filter(|a| !a.trim().is_empty()).unwrap_or(APPLICATION_PLACEHOLDER)
        )
    });
    CollectPlan { kernel: launch.name.clone(), missing, command, notes }
}

/// `s` as one POSIX shell word (single-quoted unless it is plainly safe).
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_one_word() {
        assert_eq!(shell_quote("_Z6reducePiS_j"), "_Z6reducePiS_j");
        assert_eq!(shell_quote("reduce(int *, int *)"), "'reduce(int *, int *)'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn plan_joins_the_missing_sections_once() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/rtx4090-lashi/reduceInteger.csv");
        let Ok(profile) = crate::profile::read_path(&path) else {
            panic!("corpus file {} unreadable", path.display());
        };
        let analysed = crate::analysis::analyse_profile(&profile);
        let launch = &analysed.launches[0];
        let p = plan(launch, Some("./reduceInteger"), "more");
        // A metrics-only CSV lacks sections keet uses: each appears once, with the kernel filter.
        assert!(!p.missing.is_empty(), "{p:?}");
        let cmd = p.command.expect("a command");
        assert!(cmd.starts_with("ncu --section "), "{cmd}");
        assert!(cmd.ends_with("--launch-count 1 -o more ./reduceInteger"), "{cmd}");
        assert!(cmd.contains(&format!("--kernel-name {}", shell_quote(launch.mangled_name.as_deref().unwrap_or(&launch.name)))), "{cmd}");
        for m in &p.missing {
            let first = m.ncu_option.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
            assert_eq!(cmd.matches(&first).count(), 1, "{first} in {cmd}");
        }
    }
}
