//! The model's answer for one kernel, step by step: the question ([`super::ask::question`]), the
//! shared ask loop with its structure check ([`super::ask::ask_findings`]), every sentence through
//! the gate ([`super::gate::gate_findings`]), the rule layer filling the gaps; then, when keet found
//! the kernel's code, the one checked edit ([`super::ask::ask_for_edit`]).

use super::ask::{self, Asking};
use super::code::Located;
use super::gate;
use super::report::CachedFindings;
use super::rule_answer::rules_only;
use super::ExplainError;

/// Asks the model, validates, repairs once, drops what still fails, puts every sentence through
/// the prose gate (one re-ask, then the expert text), and fills gaps from the rules.
pub fn explain_with_model(asking: &mut Asking) -> Result<CachedFindings, ExplainError> {
    let Some(question) = ask::question(asking)? else {
        return Ok(rules_only(asking.launch, asking.la, asking.lines));
    };
    let answer = ask::ask_findings(asking, &question)?;
    gate::gate_findings(asking, &question, answer)
}

/// The model's findings for one kernel, and its edit when keet has the kernel's code.
pub fn answer_kernel(asking: &mut Asking, located: Option<&Located>) -> Result<CachedFindings, ExplainError> {
    let mut found = explain_with_model(asking)?;
    if let Some(loc) = located {
        found.code = Some(ask::ask_for_edit(asking, &found, loc)?);
    }
    Ok(found)
}
