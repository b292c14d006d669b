//! The one ask loop every stage uses (explain, compare, eval): generate under a JSON Schema, parse,
//! check, re-ask with the reasons (a bounded number of times, still under the schema), and report
//! what was accepted or why nothing was, so the caller falls back to its expert text.
//!
//! The loop knows nothing of profiles: the caller passes its check (the validator against the raw
//! metrics) and the words of its re-ask.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::engine::{GenerateOptions, StopReason};
use super::model::LlmError;
use super::shared::Generate;
use super::template::ChatMessage;

/// What came of one ask.
#[derive(Debug)]
pub struct AskOutcome<T> {
    /// The answer that passed the check, if any.
    pub accepted: Option<T>,
    /// Generations made (1: the first answer passed or no re-ask was allowed).
    pub attempts: usize,
    /// The reasons each refused answer failed, in order (the first answer's first).
    pub refusals: Vec<Vec<String>>,
    /// The last answer that parsed but failed the check, when none passed.
    pub last_refused: Option<T>,
}

impl<T> AskOutcome<T> {
    /// Whether the accepted answer needed a re-ask.
    pub fn repaired(&self) -> bool {
        self.accepted.is_some() && !self.refusals.is_empty()
    }
}

/// One question to the model under a schema.
pub struct Ask<'a> {
    /// The conversation up to the question (system, user); re-asks append the refused answer and
    /// the reasons after it.
    pub messages: Vec<ChatMessage>,
    pub schema: &'a Value,
    pub options: GenerateOptions,
    /// Re-asks allowed after a refused answer.
    pub reasks: usize,
}

/// Asks, checks and re-asks. `check` may tidy the answer in place (dedupe citations, drop parts it
/// refuses) and returns the reasons it fails; `reask` words the follow-up message from them.
/// A conversation too long for the model's context is a refusal with that reason (the caller's
/// expert text stands), not an error: a small model's long, cut-off answer must not end a batch.
/// Other errors of the model (not of its answers) and of `reask` end the loop.
///
/// `engine`: an [`crate::Engine`], or an [`crate::EngineHandle`] so that several asks on threads share
/// one model's decode steps ([`crate::shared`]).
pub fn ask<T, E>(
    engine: &mut (impl Generate + ?Sized),
    question: Ask<'_>,
    mut check: impl FnMut(&mut T) -> Result<(), Vec<String>>,
    reask: impl Fn(&[String]) -> Result<String, E>,
) -> Result<AskOutcome<T>, E>
where
    T: DeserializeOwned,
    E: From<LlmError>,
{
    let base = question.messages.len();
    let mut messages = question.messages;
    let mut outcome = AskOutcome { accepted: None, attempts: 0, refusals: Vec::new(), last_refused: None };
    loop {
        let generation = match engine.generate(&messages, &question.options, Some(question.schema)) {
            Ok(generation) => generation,
            Err(too_long @ LlmError::PromptTooLong { .. }) => {
                let when = if outcome.attempts == 0 { "the question" } else { "the re-ask" };
                outcome.refusals.push(vec![format!("{when} does not fit the model's context ({too_long})")]);
                return Ok(outcome);
            }
            Err(other) => return Err(other.into()),
        };
        outcome.attempts += 1;
        let reasons = match serde_json::from_str::<T>(&generation.text) {
            Ok(mut answer) => match check(&mut answer) {
                Ok(()) => {
                    outcome.accepted = Some(answer);
                    return Ok(outcome);
                }
                Err(reasons) => {
                    outcome.last_refused = Some(answer);
                    reasons
                }
            },
            Err(e) => vec![format!(
                "the model's output was not complete JSON ({e}; stop: {})",
                match generation.stop_reason {
                    StopReason::MaxTokens => "token budget reached",
                    _ => "end of output",
                }
            )],
        };
        outcome.refusals.push(reasons.clone());
        if outcome.attempts > question.reasks {
            return Ok(outcome);
        }
        messages.truncate(base);
        messages.push(ChatMessage::assistant(generation.text));
        messages.push(ChatMessage::user(reask(&reasons)?));
    }
}
