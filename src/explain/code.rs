//! The kernel's code and the model's edit. Finds the explained kernel's definition (in the source
//! files the report embeds, or in `--source FILE|DIR`), shows it to the model beside the primary
//! finding, and checks the one edit the model proposes before it is shown: keet-code's checks (the
//! lines exist, stay in the kernel, still parse, use known identifiers) and the kinds of change
//! that fix the finding's category (`expert/edits.toml`). A refused edit is re-asked once with the
//! reasons; then no edit is shown and the report says why.

//!
//! It imports none of the explain stage's siblings (their report, prompt and validator modules):
//! the caller passes the finding, the hot lines, the cause-and-effect lines and the check of the
//! explanation's sense, so this module stays out of the stage's import circle.

use super::ExplainError;
use crate::grounding::Grounding;
use crate::llm::engine::GenerateOptions;
use crate::llm::template::ChatMessage;
use crate::llm::Generate;
use crate::profile::SourceFile;
use crate::report::code::{CodeEdit, CodeOrigin, CodeSection, EditCheck, KernelCodeRef, RefusedEdit};
use crate::rules::Category;
use keet_code::{CodeFile, EditKind, KernelCode};
use minijinja::Environment;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The kinds of change that fix each category, with why and the source (reviewable in one place).
pub const EDITS: &str = include_str!("../../expert/edits.toml");
const EDIT_SYSTEM: &str = include_str!("../../prompts/edit-system.jinja");
const EDIT: &str = include_str!("../../prompts/edit.jinja");
const EDIT_REPAIR: &str = include_str!("../../prompts/edit-repair.jinja");

/// Most lines of a kernel shown to the model (a longer one is cut after its hottest lines).
const MAX_CODE_LINES: usize = 120;
/// Most lines an edit writes in place of the one line it changes.
const MAX_AFTER_LINES: usize = 6;
/// Longest line the model may write.
const MAX_LINE_CHARS: usize = 160;

/// sha256 of the edit prompts and table (part of the cache key of a kernel whose code is known).
pub fn files_sha256() -> String {
    crate::cache::sha256_hex(format!("{EDITS}\0{EDIT_SYSTEM}\0{EDIT}\0{EDIT_REPAIR}").as_bytes())
}

/// One kind of change that fixes a category, with why and its source.
pub type EditRule = keet_code::ExpertEdit;

/// Per finding category (its kebab-case id), the kinds of change that fix it.
type EditTable = BTreeMap<String, Vec<EditRule>>;

fn table() -> &'static EditTable {
    static TABLE: std::sync::OnceLock<EditTable> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| toml::from_str(EDITS).expect("expert/edits.toml is valid (checked by a unit test)"))
}

/// The kinds of change that fix `category` (empty: keet proposes no edit for it).
pub fn rules_for(category: Category) -> &'static [EditRule] {
    table().get(category.as_str()).map(Vec::as_slice).unwrap_or(&[])
}

/// The user's `--source FILE|DIR` files, read once per run; each unreadable, non-UTF-8, huge or
/// unparsable file is a warning naming it, and the rest goes on.
pub fn read_user_code(paths: &[PathBuf]) -> (Vec<CodeFile>, Vec<String>) {
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    for path in paths {
        let (found, warned) = keet_code::read_user_sources(path);
        files.extend(found);
        warnings.extend(warned);
    }
    (files, warnings)
}

/// The explained kernel's definition and the files it was found in.
#[derive(Debug, Clone)]
pub struct Located {
    pub kernel: KernelCode,
    pub files: Vec<CodeFile>,
    pub origin: CodeOrigin,
}

impl Located {
    pub fn reference(&self) -> KernelCodeRef {
        KernelCodeRef {
            path: self.kernel.path.clone(),
            name: self.kernel.name.clone(),
            start_line: self.kernel.start_line,
            end_line: self.kernel.end_line,
            origin: self.origin,
            note: self.kernel.note.clone(),
        }
    }
}

/// Finds the kernel `name` in the user's files first (the code they want to change), then in the
/// files the report embeds. `Err` says why it was not found, in a sentence.
pub fn locate(name: &str, embedded: &[SourceFile], user: &[CodeFile]) -> Result<Located, String> {
    let mut why: Vec<String> = Vec::new();
    if !user.is_empty() {
        match keet_code::locate(user, name) {
            Ok(kernel) => return Ok(Located { kernel, files: user.to_vec(), origin: CodeOrigin::User }),
            Err(e) => why.push(format!("in the --source files: {e}")),
        }
    }
    if !embedded.is_empty() {
        let files: Vec<CodeFile> = embedded.iter().map(|f| CodeFile { path: f.path.clone(), text: f.text.clone() }).collect();
        match keet_code::locate(&files, name) {
            Ok(kernel) => return Ok(Located { kernel, files, origin: CodeOrigin::Embedded }),
            Err(e) => why.push(format!("in the report's embedded sources: {e}")),
        }
    }
    if why.is_empty() {
        return Err(
            "not found: the report embeds no source (profile with `ncu --import-source yes`) and no --source FILE|DIR was given".into()
        );
    }
    Err(format!("not found {}", why.join("; ")))
}

/// Which finding the edit is for, by its position in `categories` (most important first): the
/// first whose fix can be made in the kernel's own code (a kind of change other than the launch's
/// grid or block shape, which usually follow from the problem size the user chose), else the first.
pub fn edit_target(categories: &[Category]) -> Option<usize> {
    let in_code = |c: &Category| rules_for(*c).iter().any(|r| !r.kind.is_launch_shape());
    categories.iter().position(in_code).or(if categories.is_empty() { None } else { Some(0) })
}

/// The finding an edit is asked for.
#[derive(Debug, Clone, Copy)]
pub struct EditTarget<'a> {
    pub category: Category,
    pub claim: &'a str,
    pub explanation: &'a str,
}

/// A source line the profile marks hot: its place and its share of the profile's counter.
#[derive(Debug, Clone)]
pub struct HotLine {
    pub file: Option<String>,
    pub line: Option<u64>,
    pub share_pct: f64,
    pub counter: String,
}

/// sha256 of the located kernel's text (part of the cache key).
pub fn code_sha256(located: Option<&Located>) -> String {
    located.map(|l| crate::cache::sha256_hex(format!("{}\0{}", l.kernel.path, l.kernel.text).as_bytes())).unwrap_or_default()
}

/// The code section of a kernel the model was not asked to edit: where its code is (and `why` no
/// edit), or why the code was not found.
pub fn section_without_edit(found: &Result<Located, String>, why: &str) -> CodeSection {
    match found {
        Ok(located) => CodeSection { kernel: Some(located.reference()), no_edit: Some(why.to_string()), ..Default::default() },
        Err(why) => CodeSection { missing: Some(why.clone()), ..Default::default() },
    }
}

/// The kernel's lines as the model sees them: numbered, the hot lines marked with their share of
/// the profile's counter. Returns the text and the lines an edit may replace (trimmed, distinct).
pub fn numbered_code(kernel: &KernelCode, hot: &[HotLine]) -> (String, Vec<String>) {
    let lines: Vec<&str> = kernel.text.lines().collect();
    let heat = |line_no: usize| {
        hot.iter().find(|h| h.line == Some(line_no as u64) && h.file.as_deref().is_none_or(|f| same_file(f, &kernel.path)))
    };
    let mut shown = String::new();
    let mut options: Vec<String> = Vec::new();
    for (offset, text) in lines.iter().enumerate().take(MAX_CODE_LINES) {
        let line_no = kernel.start_line + offset;
        shown.push_str(&format!("{line_no:>4}  {text}"));
        if let Some(h) = heat(line_no) {
            shown.push_str(&format!("    // profile: {:.1}% of {}", h.share_pct, h.counter));
        }
        shown.push('\n');
        let trimmed = text.trim();
        if !trimmed.is_empty() && trimmed.len() <= MAX_LINE_CHARS && !options.iter().any(|o| o == trimmed) {
            options.push(trimmed.to_string());
        }
    }
    if lines.len() > MAX_CODE_LINES {
        shown.push_str(&format!("      ... ({} more lines)\n", lines.len() - MAX_CODE_LINES));
    }
    (shown, options)
}

/// The source lines of the kernel's launch sites (1-based line, trimmed text), with the lines that
/// configure them.
fn launch_lines(located: &Located) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    for site in &located.kernel.launch_sites {
        let Some(file) = located.files.get(site.file) else { continue };
        let lines: Vec<&str> = file.text.lines().collect();
        for line_no in site.config_lines.iter().copied().chain(site.line..=site.end_line) {
            let text = lines.get(line_no.wrapping_sub(1)).map(|t| t.trim().to_string()).unwrap_or_default();
            if !text.is_empty() && !out.iter().any(|(n, _)| *n == line_no) {
                out.push((line_no, text));
            }
        }
    }
    out.truncate(12);
    out
}

fn same_file(profile_path: &str, code_path: &str) -> bool {
    let base = |p: &str| p.replace('\\', "/").rsplit('/').next().unwrap_or_default().to_string();
    base(profile_path) == base(code_path)
}

/// Edits keet can write itself for the allowed kinds, as patterns the model may take or adapt: a
/// `__shared__` 2-D array padded by one column (bank conflicts), a line's `double`s and
/// double-precision literals in single precision. The model's answer is checked as any other.
pub fn candidate_edits(kernel: &KernelCode, allowed: &[EditKind]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in kernel.text.lines().map(str::trim) {
        if allowed.contains(&EditKind::SharedDeclaration) && line.starts_with("__shared__") {
            if let Some(padded) = padded_declaration(line) {
                out.push((line.to_string(), padded));
            }
        }
        if allowed.contains(&EditKind::FloatPrecision) && !line.starts_with("//") {
            let single = single_precision(line);
            if single != line {
                out.push((line.to_string(), single));
            }
        }
    }
    out.truncate(4);
    out
}

/// `__shared__ T name[A][B];` as `__shared__ T name[A][B + 1];` (the last dimension padded).
fn padded_declaration(line: &str) -> Option<String> {
    let close = line.rfind(']')?;
    let open = line[..close].rfind('[')?;
    if line[..open].matches('[').count() == 0 {
        return None;
    }
    let size = line[open + 1..close].trim();
    Some(format!("{}[{size} + 1]{}", &line[..open], &line[close + 1..]))
}

/// A line with `double` as `float` and its double-precision literals `f`-suffixed.
fn single_precision(line: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String, next: Option<char>| {
        let is_literal =
            word.contains('.') && word.chars().all(|c| c.is_ascii_digit() || c == '.') && word.chars().any(|c| c.is_ascii_digit());
        match word.as_str() {
            "double" => out.push_str("float"),
            "sqrt" | "exp" | "log" | "sin" | "cos" | "pow" | "fabs" | "tanh" if next == Some('(') => {
                out.push_str(word);
                out.push('f');
            }
            _ if is_literal && next != Some('f') => {
                out.push_str(word);
                out.push('f');
            }
            _ => out.push_str(word),
        }
        word.clear();
    };
    for c in line.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            word.push(c);
        } else {
            flush(&mut word, &mut out, Some(c));
            out.push(c);
        }
    }
    flush(&mut word, &mut out, None);
    out
}

/// The `#define` lines of the kernel's file whose names the kernel uses (`#define BDIMX 32`): the
/// sizes its arrays and loops are written in. A `#define` is one line by definition.
pub fn used_defines(located: &Located) -> Vec<String> {
    let Some(file) = located.files.get(located.kernel.file) else { return Vec::new() };
    let used = code_identifiers(&located.kernel);
    file.text
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("#define ") && line.len() <= MAX_LINE_CHARS)
        .filter(|line| line.split_whitespace().nth(1).is_some_and(|name| used.iter().any(|u| u == name.split('(').next().unwrap_or(name))))
        .take(16)
        .map(String::from)
        .collect()
}

/// The identifiers of the kernel's code a sentence may name (`tile`, `threadIdx.x`, `TILE_DIM`).
pub fn code_identifiers(kernel: &KernelCode) -> Vec<String> {
    code_identifiers_in(&kernel.text)
}

/// The identifiers of a piece of code (one-letter names only in capitals: the `A` and `B` of a GEMM).
pub fn code_identifiers_in(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        let token = token.trim_matches('.');
        let long_enough = token.len() >= 2 || token.chars().all(|c| c.is_ascii_uppercase());
        let ok = long_enough && token.len() <= 40 && token.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        if ok && !KEYWORDS.contains(&token) && !out.iter().any(|o| o == token) {
            out.push(token.to_string());
        }
    }
    out
}

/// C++/CUDA and Python keywords and types: not constructs of the user's code.
const KEYWORDS: &[&str] = &[
    "if",
    "else",
    "for",
    "while",
    "do",
    "return",
    "int",
    "float",
    "double",
    "void",
    "const",
    "unsigned",
    "char",
    "bool",
    "auto",
    "template",
    "typename",
    "struct",
    "class",
    "static",
    "inline",
    "extern",
    "__global__",
    "__device__",
    "__host__",
    "__shared__",
    "__restrict__",
    "size_t",
    "long",
    "short",
    "break",
    "continue",
    "sizeof",
    "def",
    "in",
    "and",
    "or",
    "not",
    "range",
    "pass",
    "true",
    "false",
    "True",
    "False",
    "None",
    "tl",
    "triton",
    "cuda",
    "numba",
    "jit",
    "import",
    "from",
    "as",
    "namespace",
];

/// The question's words: the finding, the kinds of change allowed, the numbered code.
fn question(
    finding: &EditTarget<'_>,
    located: &Located,
    rules: &[EditRule],
    code: &str,
    links: &[String],
) -> Result<String, minijinja::Error> {
    let kernel = &located.kernel;
    let sites: Vec<Value> = launch_lines(located).into_iter().map(|(line, text)| json!({"line": line, "text": text})).collect();
    let allowed: Vec<EditKind> = rules.iter().map(|r| r.kind).collect();
    let candidates = candidate_edits(kernel, &allowed);
    // A generic example beside a candidate for this code is copied instead of the candidate.
    let kinds: Vec<Value> = rules
        .iter()
        .map(|r| json!({"kind": r.kind.to_string(), "why": r.why, "example": if candidates.is_empty() { r.example.clone() } else { None }}))
        .collect();
    env().render_str(
        EDIT,
        json!({
            "name": kernel.name,
            "path": kernel.path,
            "start": kernel.start_line,
            "end": kernel.end_line,
            "language": if matches!(kernel.language, keet_code::Language::Python) { "python" } else { "cuda" },
            "category": finding.category.as_str(),
            "claim": finding.claim,
            "explanation": finding.explanation,
            "links": links,
            "code": code,
            "launch_sites": sites,
            "defines": used_defines(located),
            "candidates": candidates
                .into_iter()
                .map(|(before, after)| json!({"before": before, "after": after}))
                .collect::<Vec<_>>(),
            "kinds": kinds,
        }),
    )
}

fn env() -> Environment<'static> {
    crate::templating::prompt_environment()
}

/// The schema of the answer: the construct one of the code's identifiers, the explanation grounded
/// text, the one line to change copied from the code (the grammar holds the model to the code's
/// lines), and the lines that replace it, free but bounded.
pub fn edit_schema(identifiers: &[String], before_options: &[String], explanation: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "construct": { "type": "string", "enum": identifiers },
            "explanation": explanation,
            "before": { "type": "string", "enum": before_options },
            "after": {
                "type": "array",
                "items": { "type": "string", "pattern": format!("^[^\\n\\r]{{1,{MAX_LINE_CHARS}}}$") },
                "minItems": 1,
                "maxItems": MAX_AFTER_LINES
            }
        },
        "required": ["construct", "explanation", "before", "after"],
        "additionalProperties": false
    })
}

/// The model's answer.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
struct EditAnswer {
    construct: String,
    explanation: String,
    before: String,
    after: Vec<String>,
}

/// What the ask needs besides the engine.
pub struct EditQuestion<'a> {
    pub finding: EditTarget<'a>,
    /// The kernel's grounding (the code's names and numbers are added here).
    pub grounding: &'a Grounding,
    /// The kernel's cause-and-effect lines for the finding, as the finding's prompt showed them.
    pub links: Vec<String>,
    /// The sense of an explanation sentence against the profile (validator and prose gate), given
    /// the grounding it was written under: the reasons it fails.
    pub check_sense: &'a dyn Fn(&str, &Grounding) -> Vec<String>,
    pub located: &'a Located,
    pub hot: &'a [HotLine],
    pub reasks: usize,
    pub decoding: GenerateOptions,
    /// The prompt and every answer on stderr (`KEET_TRACE`).
    pub trace: bool,
}

/// The question as the model gets it: schema, conversation, and what the checks need.
struct Prepared {
    schema: Value,
    messages: Vec<ChatMessage>,
    /// The kernel's grounding with the code's identifiers added as terms.
    grounding: crate::grounding::Grounding,
    allowed: Vec<EditKind>,
    trace: bool,
}

fn prepare(q: &EditQuestion<'_>, rules: &[EditRule]) -> Result<Prepared, ExplainError> {
    let (code, mut before_options) = numbered_code(&q.located.kernel, q.hot);
    if rules.iter().any(|r| r.kind.is_launch_shape()) {
        for (_, text) in launch_lines(q.located) {
            if text.len() <= MAX_LINE_CHARS && !before_options.contains(&text) {
                before_options.push(text);
            }
        }
    }
    let identifiers = code_identifiers(&q.located.kernel);
    let mut grounding = q.grounding.clone();
    for id in &identifiers {
        if !grounding.terms.contains(id) {
            grounding.terms.push(id.clone());
        }
        // The gate's word check admits what the model was shown: the code's names too.
        for part in id.split('.') {
            grounding.fact_words.push(part.to_lowercase());
        }
    }
    // The explanation ties the finding to the code: its numbers are the code's own ("[32][33]",
    // `#define BDIMX 32`). The profile's numbers are the finding's, shown beside it; a small model
    // that copies them here attaches them to the wrong quantity.
    grounding.numbers = code_literals(&code_text(q.located));
    let shape = crate::grounding::TextShape { sentences: 1..=2, words: 6..=32, openings: vec![] };
    let explanation = json!({ "type": "string", "pattern": grounding.text_pattern(&shape) });
    let schema = edit_schema(&identifiers, &before_options, explanation);
    let messages = vec![
        ChatMessage::system(env().render_str(EDIT_SYSTEM, json!({}))?),
        ChatMessage::user(question(&q.finding, q.located, rules, &code, &q.links)?),
    ];
    let trace = q.trace;
    if trace {
        eprintln!("--- edit prompt for {}\n{}", q.located.kernel.name, messages[1].content);
    }
    Ok(Prepared { schema, messages, grounding, allowed: rules.iter().map(|r| r.kind).collect(), trace })
}

/// One answer of the model, checked.
enum Attempt {
    Accepted(EditAnswer, keet_code::CheckedEdit),
    Refused(EditAnswer, Vec<String>),
    /// No answer to check (the conversation does not fit the context): why.
    Unanswered(String),
}

/// One generation through the shared ask loop (no re-ask there: the caller re-asks with sampling).
fn attempt(
    engine: &mut dyn Generate,
    q: &EditQuestion<'_>,
    prepared: &Prepared,
    messages: Vec<ChatMessage>,
    options: GenerateOptions,
) -> Result<Attempt, ExplainError> {
    let mut checked: Option<keet_code::CheckedEdit> = None;
    let outcome = crate::llm::ask::ask(
        engine,
        crate::llm::ask::Ask { messages, schema: &prepared.schema, options, reasks: 0 },
        |answer: &mut EditAnswer| {
            if prepared.trace {
                eprintln!("--- edit answer\n{answer:?}");
            }
            let reasons = check_answer(q, &prepared.grounding, &prepared.allowed, answer, &mut checked);
            if reasons.is_empty() {
                Ok(())
            } else {
                Err(reasons)
            }
        },
        |reasons| env().render_str(EDIT_REPAIR, json!({ "reasons": reasons })).map_err(ExplainError::from),
    )?;
    let reasons = outcome.refusals.last().cloned().unwrap_or_default();
    Ok(match (outcome.accepted, checked, outcome.last_refused) {
        (Some(answer), Some(edit), _) => Attempt::Accepted(answer, edit),
        (_, _, Some(answer)) => Attempt::Refused(answer, reasons),
        _ => Attempt::Unanswered(if reasons.is_empty() { "no answer".into() } else { reasons.join("; ") }),
    })
}

/// Asks the model for the one edit of `q.finding` and checks it; a refused edit is re-asked (with
/// seeded sampling: greedy decoding would give the same edit again) with the reasons. The section
/// says which edit passed, or why none is shown.
pub fn propose_edit(engine: &mut dyn Generate, q: EditQuestion<'_>) -> Result<CodeSection, ExplainError> {
    let category = q.finding.category;
    let mut section = CodeSection { kernel: Some(q.located.reference()), ..Default::default() };
    let rules = rules_for(category);
    if rules.is_empty() {
        section.no_edit = Some(format!("keet proposes no code edit for {}", category.as_str()));
        return Ok(section);
    }
    let prepared = prepare(&q, rules)?;
    // No repeat penalty: code repeats its tokens on purpose, and a penalised `__` turned
    // `__shared__` into `_shared__` in the corpus run.
    let greedy = GenerateOptions { max_tokens: 700, repeat_penalty: 1.0, ..q.decoding.clone() };
    let sampled = GenerateOptions { temperature: 0.7, top_p: 0.9, seed: 11, ..greedy.clone() };
    let mut messages = prepared.messages.clone();
    let mut last = String::from("no answer");
    for round in 0..=q.reasks {
        let options = if round == 0 { greedy.clone() } else { sampled.clone() };
        match attempt(engine, &q, &prepared, messages.clone(), options)? {
            Attempt::Accepted(answer, edit) => {
                section.edit = Some(shown_edit(category, answer, edit, round > 0));
                return Ok(section);
            }
            Attempt::Refused(answer, reasons) => {
                last = reasons.join("; ");
                section.refused.push(RefusedEdit {
                    before: vec![answer.before.clone()],
                    after: answer.after.clone(),
                    reasons: reasons.clone(),
                });
                // A fresh question that says what was refused: shown its own answer, the model
                // copies it again.
                let repair = env().render_str(EDIT_REPAIR, json!({ "reasons": reasons }))?;
                messages.truncate(1);
                messages.push(ChatMessage::user(format!("{}\n\n{repair}", prepared.messages[1].content)));
            }
            Attempt::Unanswered(why) => {
                last = why;
                break;
            }
        }
    }
    section.no_edit = Some(match section.refused.len() {
        0 => format!("the model gave no edit: {last}"),
        tries => {
            let reasons = &section.refused[tries - 1].reasons;
            let more = if reasons.len() > 1 { format!(" and {} more reasons", reasons.len() - 1) } else { String::new() };
            format!(
                "the model's edit was refused {} (last: {}{more}; --verbose shows them)",
                if tries == 1 { "once".to_string() } else { format!("{tries} times") },
                reasons.first().map(String::as_str).unwrap_or("?")
            )
        }
    });
    Ok(section)
}

/// Every reason the answer fails: its explanation (sense, numbers, naming the code) and its edit.
fn check_answer(
    q: &EditQuestion<'_>,
    grounding: &Grounding,
    allowed: &[EditKind],
    answer: &EditAnswer,
    checked: &mut Option<keet_code::CheckedEdit>,
) -> Vec<String> {
    // The profile's checks read the sentence with the code's numbers set aside: those are checked
    // against the code, where they occur.
    let profile_text = without_code_numbers(&answer.explanation, &code_literals(&code_text(q.located)));
    let mut reasons = (q.check_sense)(&profile_text, grounding);
    let before_names = code_identifiers_in(&answer.before);
    if !names_code(&answer.explanation, &answer.construct) && !before_names.iter().any(|n| names_code(&answer.explanation, n)) {
        reasons.push(format!("the explanation must name the construct `{}` in the code that causes the problem", answer.construct));
    }
    let edit = keet_code::Edit { before: answer.before.clone(), after: answer.after.join("\n") };
    match keet_code::check_edit(&q.located.files, &q.located.kernel, &edit, allowed) {
        Ok(ok) => *checked = Some(ok),
        Err(refusal) => {
            *checked = None;
            reasons.push(refusal.to_string());
        }
    }
    reasons
}

/// The kernel's text and the `#define` lines it uses.
fn code_text(located: &Located) -> String {
    format!("{}\n{}", used_defines(located).join("\n"), located.kernel.text)
}

/// The integer literals of a kernel's code ("32", "33"), as a sentence would write them.
pub fn code_literals(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        let digits = token.trim_end_matches(['u', 'U', 'l', 'L', 'f', 'F']);
        if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) && !out.iter().any(|o| o == digits) {
            out.push(digits.to_string());
        }
    }
    out
}

/// `text` with each number that is one of the code's literals read as a plain word ("the 32-wide
/// tile" as "the several wide tile"), so checks of the profile's numbers pass over it.
fn without_code_numbers(text: &str, literals: &[String]) -> String {
    let words: Vec<String> = text
        .split(' ')
        .map(|word| {
            let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
            let number: String = word.chars().take_while(|c| c.is_ascii_digit() || matches!(c, '.' | ',')).collect();
            let unit_follows = word[number.len()..].starts_with(['%', 'x']);
            if digits.is_empty() || !literals.contains(&digits) || number.trim_end_matches(['.', ',']) != digits || unit_follows {
                return word.to_string();
            }
            let rest = word[digits.len()..].trim_start_matches('-');
            if rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_punctuation()) {
                format!("several{rest}")
            } else {
                format!("several {rest}")
            }
        })
        .collect();
    words.join(" ")
}

/// Whether `text` names `construct` as a word of its own (not inside a longer identifier).
fn names_code(text: &str, construct: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map(|t| t.trim_end_matches('.'))
        .any(|t| t == construct || t.split('.').next() == Some(construct))
}

fn shown_edit(category: Category, answer: EditAnswer, edit: keet_code::CheckedEdit, repaired: bool) -> CodeEdit {
    let checks = ["differs", "before-lines-exist", "inside-kernel", "parses", "identifiers", "kind-of-change", "explanation"]
        .iter()
        .map(|name| EditCheck { name: name.to_string(), passed: true })
        .collect();
    CodeEdit {
        category,
        construct: answer.construct,
        explanation: answer.explanation,
        path: edit.path,
        start_line: edit.start_line,
        before: edit.before_lines,
        after: edit.after_lines,
        kinds: edit.kinds.iter().map(|k| k.to_string()).collect(),
        unified_diff: edit.unified_diff,
        checks,
        repaired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edit_table_covers_every_category() {
        for c in Category::ALL {
            assert!(!rules_for(c).is_empty(), "expert/edits.toml has no kind of change for {}", c.as_str());
            for r in rules_for(c) {
                assert!(!r.why.trim().is_empty(), "{}: {} has no why", c.as_str(), r.kind);
            }
        }
    }

    #[test]
    fn the_code_numbers_are_set_aside_for_the_profile_checks() {
        let literals = code_literals("__shared__ int tile[32][33]; x = 2.0f; y = 16u;");
        assert_eq!(literals, vec!["32", "33", "2", "0", "16"]);
        assert_eq!(without_code_numbers("The 32-wide tile has 33 columns.", &literals), "The several wide tile has several columns.");
        assert_eq!(without_code_numbers("It is 41.4% of the time.", &literals), "It is 41.4% of the time.");
        assert_eq!(without_code_numbers("It is 2.5 us, 16% and 16x.", &literals), "It is 2.5 us, 16% and 16x.");
        assert_eq!(without_code_numbers("A row of 16.", &literals), "A row of several.");
    }

    #[test]
    fn keet_writes_candidate_edits_for_padding_and_single_precision() {
        assert_eq!(padded_declaration("__shared__ int tile[BDIMX][BDIMY];").as_deref(), Some("__shared__ int tile[BDIMX][BDIMY + 1];"));
        assert_eq!(padded_declaration("__shared__ float sum[256];"), None);
        assert_eq!(single_precision("double a = sqrt(x[i]) * 2.0 + 1.5f;"), "float a = sqrtf(x[i]) * 2.0f + 1.5f;");
        assert_eq!(single_precision("int i = blockIdx.x;"), "int i = blockIdx.x;");
    }

    #[test]
    fn a_construct_is_named_as_a_word_of_its_own() {
        assert!(names_code("The index of tile reads a column.", "tile"));
        assert!(names_code("threadIdx.x strides the loads.", "threadIdx"));
        assert!(!names_code("The tiles conflict.", "tile"));
    }

    #[test]
    fn the_edit_schema_holds_the_before_lines_to_the_code() {
        let schema = edit_schema(&["tile".into()], &["tile[x][y] = in[i];".into()], json!({"type": "string"}));
        assert_eq!(schema["properties"]["before"]["enum"][0], "tile[x][y] = in[i];");
        assert_eq!(schema["properties"]["construct"]["enum"][0], "tile");
    }
}
