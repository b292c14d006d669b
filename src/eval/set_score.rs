//! `set` against `profiles` on the same questions for `keet eval --sets`: `keet eval`'s own
//! scoring ([`score::report`]) with the answers' `profiles` letters standing in the baseline's
//! place, so the wins, losses, points and sign test are computed exactly as each format's against
//! `raw`. Kept apart from [`super::sets`] so that the report's type ([`AgainstProfiles`], which
//! the score module names) does not make the sets and the scores import each other.

use super::score::{self, Answered, Key};
use super::sets::{claim_thresholds, AgainstProfiles, PairedRow, SetPaired};
use std::collections::BTreeMap;

/// Scores `set` against `profiles`; `None` when either was not asked.
pub fn against_profiles(keys: &[Key], answers: &[Answered], formats: &[String], rotations: usize) -> Option<AgainstProfiles> {
    let has = |f: &str| formats.iter().any(|x| x == f);
    if !has("set") || !has("profiles") {
        return None;
    }
    let renamed: Vec<Answered> = answers
        .iter()
        .map(|a| {
            let mut given = BTreeMap::new();
            for (format, as_named) in [("profiles", score::BASELINE), ("set", "set")] {
                if let Some(letters) = a.given.get(format) {
                    given.insert(as_named.to_string(), letters.clone());
                }
            }
            Answered { given, ..a.clone() }
        })
        .collect();
    let formats = [score::BASELINE.to_string(), "set".to_string()];
    let r = score::report(keys, renamed, &formats, meta(rotations));
    let paired = |row: &score::Row| -> Option<PairedRow> {
        let vs = row.cells.iter().find(|c| c.format == "set")?.vs_raw.clone()?;
        let paired =
            SetPaired { against: "profiles".into(), wins: vs.wins, losses: vs.losses, delta_pts: vs.delta_pts, p_value: vs.p_value };
        Some(PairedRow { kind: row.kind.clone(), questions: row.questions, paired })
    };
    let overall = paired(&r.overall)?;
    let (min_points, max_p) = claim_thresholds();
    Some(AgainstProfiles {
        format: "set".into(),
        against: "profiles".into(),
        rows: r.by_kind.iter().filter(|row| row.questions > 0).filter_map(paired).collect(),
        claim_holds: overall.paired.delta_pts >= min_points && overall.paired.p_value < max_p,
        overall,
        claim_min_points: min_points,
        claim_max_p: max_p,
    })
}

fn meta(rotations: usize) -> score::ReportMeta {
    score::ReportMeta {
        model: None,
        answers_file: None,
        seeds: vec![],
        files: vec![],
        profiles_without_questions: vec![],
        rotations,
        answer_by: None,
        truncated_contexts: 0,
        cost: vec![],
        wall_s: None,
        errors: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::questions::QuestionKind;

    /// Planted answers: `set` right in every rotation, `profiles` always `B`. Twelve questions
    /// keyed A, C or D: set wins all twelve (p < 0.001), the claim holds, and the text table says
    /// so without listing the single-profile kinds as missing.
    #[test]
    fn set_against_profiles_uses_the_paired_sign_test() {
        let letters = ["A", "C", "D"];
        let ids: Vec<String> = (0..12).map(|i| format!("q{i}")).collect();
        let keys: Vec<Key> =
            ids.iter().enumerate().map(|(i, id)| Key { id, seed: 0, kind: QuestionKind::SetBound, answer: letters[i % 3] }).collect();
        let answers: Vec<Answered> = keys
            .iter()
            .map(|k| {
                let right: Vec<String> =
                    (0..super::super::ROTATIONS).map(|r| super::super::rotated_letter(k.answer, r).to_string()).collect();
                let given = [("profiles".to_string(), vec!["B".to_string(); 4]), ("set".to_string(), right)].into();
                Answered { id: k.id.into(), kind: k.kind, answer: k.answer.into(), given }
            })
            .collect();
        let formats = ["profiles".to_string(), "set".to_string()];
        let vs = against_profiles(&keys, &answers, &formats, 4).expect("both formats asked");
        assert_eq!((vs.overall.paired.wins, vs.overall.paired.losses, vs.overall.paired.delta_pts), (12, 0, 100.0));
        assert!(vs.overall.paired.p_value < 0.001 && vs.claim_holds);
        assert_eq!(vs.rows.len(), 1);
        assert!(against_profiles(&keys, &answers, &formats[..1], 4).is_none());
        let mut report = score::report(&keys, answers, &formats, score::ReportMeta { seeds: vec![0], ..meta(4) });
        report.set_vs_profiles = Some(vs);
        let text = crate::render::render("eval.txt", &report).expect("renders");
        assert!(text.contains("The claim holds"), "{text}");
        assert!(text.contains("No questions of kind: set-fastest") && !text.contains("occupancy-limiter"), "{text}");
    }
}
