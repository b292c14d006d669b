//! The tree-sitter layer: parsing a file with its grammar, walking trees without recursion, and
//! the small node helpers the other modules share (text, lines, error nodes).

use crate::Language;
use std::ops::Range;
use tree_sitter::{Node, Parser, Tree};

/// Parses `text` with the grammar of `language`; `None` only if tree-sitter gives no tree.
pub(crate) fn parse(language: Language, text: &str) -> Option<Tree> {
    let grammar: tree_sitter::Language = match language {
        Language::Cuda => tree_sitter_cuda::LANGUAGE.into(),
        Language::Python => tree_sitter_python::LANGUAGE.into(),
    };
    let mut parser = Parser::new();
    parser.set_language(&grammar).ok()?;
    parser.parse(text, None)
}

/// The source text of a node ("" if the range is not on character boundaries).
pub(crate) fn text_of<'a>(node: Node, text: &'a str) -> &'a str {
    text.get(node.byte_range()).unwrap_or("")
}

/// The 1-based line a node starts on.
pub(crate) fn start_line(node: Node) -> usize {
    node.start_position().row + 1
}

/// The 1-based line a node ends on (a node ending at column 0 ends on the line before).
pub(crate) fn end_line(node: Node) -> usize {
    let end = node.end_position();
    if end.column == 0 && end.row > node.start_position().row {
        end.row
    } else {
        end.row + 1
    }
}

/// Visits every node of the tree under `root` in document order, without recursion (trees from
/// odd input can be deep). `visit` returns false to skip a node's children.
pub(crate) fn walk<'t>(root: Node<'t>, mut visit: impl FnMut(Node<'t>) -> bool) {
    let mut cursor = root.walk();
    loop {
        let descend = visit(cursor.node());
        if descend && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.node() == root {
                return;
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

/// Visits the nodes that overlap the byte range `bytes`.
pub(crate) fn walk_range<'t>(root: Node<'t>, bytes: Range<usize>, mut visit: impl FnMut(Node<'t>)) {
    walk(root, |node| {
        let overlaps = node.start_byte() < bytes.end && node.end_byte() > bytes.start;
        let empty_inside = node.start_byte() == node.end_byte() && bytes.contains(&node.start_byte());
        if overlaps || empty_inside {
            visit(node);
        }
        overlaps
    });
}

/// The 1-based start lines of ERROR and MISSING nodes.
pub(crate) fn error_lines(tree: &Tree) -> Vec<usize> {
    let mut lines = Vec::new();
    walk(tree.root_node(), |node| {
        if node.is_error() || node.is_missing() {
            lines.push(start_line(node));
        }
        true
    });
    lines
}

/// The share of the text's bytes inside ERROR nodes (outermost ones only), 0.0 to 1.0.
pub(crate) fn error_share(tree: &Tree, len: usize) -> f64 {
    let mut bytes = 0usize;
    walk(tree.root_node(), |node| {
        if node.is_error() {
            bytes += node.byte_range().len();
            return false;
        }
        node.has_error()
    });
    if len == 0 {
        0.0
    } else {
        bytes as f64 / len as f64
    }
}

/// The byte range of the 1-based lines `first..=last` of `text` (clamped to the text).
pub(crate) fn line_bytes(text: &str, first: usize, last: usize) -> Range<usize> {
    let mut start = text.len();
    let mut end = text.len();
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let number = index + 1;
        if number == first {
            start = offset;
        }
        offset += line.len();
        if number == last {
            end = offset;
            break;
        }
    }
    start.min(end)..end
}

/// Collapses whitespace runs to one space and trims: how lines and expressions are compared.
pub(crate) fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The identifier a (possibly nested) subscript, field or call is based on: `tile` for
/// `tile[i][j]`, `s` for `s.data[i]`.
pub(crate) fn base_identifier<'a>(node: Node, text: &'a str) -> &'a str {
    let mut current = node;
    for _ in 0..64 {
        if matches!(current.kind(), "identifier" | "field_identifier" | "type_identifier") {
            return text_of(current, text);
        }
        let next = ["argument", "value", "object", "function", "name", "field"]
            .iter()
            .find_map(|field| current.child_by_field_name(field))
            .or_else(|| current.named_child(0));
        match next {
            Some(child) => current = child,
            None => break,
        }
    }
    text_of(current, text)
}
