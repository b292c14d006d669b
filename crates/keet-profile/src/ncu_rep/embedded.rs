//! Embedded source records: the `NumSources` part of a block payload ([`proto::SourceData`]),
//! read into the profile's [`SourceFile`]s and each launch's list of them.
//!
//! One record describes one loaded module: its cubin (kept for its line table, see
//! [`super::lines`]) and, with
//! `ncu --import-source yes`, the source files the compiler saw. A launch names its module by
//! `ProfileResult.Source.Reference`; its files are those of every record with that reference, as
//! Nsight Compute's `action.source_files()` lists them. Files are kept once per path (the first
//! text wins; a different second text is noted). Text that is not UTF-8 is decoded lossily and
//! noted with its path. A record that does not decode costs its own files only (a note with its
//! byte offset), never the launches.

use super::proto;
use crate::SourceFile;
use prost::Message;
use std::collections::HashMap;

/// The source records read so far, and what was left out of them.
#[derive(Default)]
pub(super) struct Embedded {
    files: Vec<SourceFile>,
    by_path: HashMap<String, usize>,
    /// Per module reference: its files (indices into `files`), in order of first appearance.
    modules: HashMap<u64, Vec<usize>>,
    /// Records that carry a cubin.
    binaries: usize,
    /// Per module reference: the first cubin its records carry.
    cubins: HashMap<u64, prost::bytes::Bytes>,
    /// Records that did not decode, and the first one's offset and error.
    undecoded: usize,
    first_undecoded: Option<(usize, String)>,
    notes: Vec<String>,
}

impl Embedded {
    /// Reads one source record: its protobuf bytes, which start at byte `offset` of the file.
    pub(super) fn add(&mut self, offset: usize, record: &[u8]) {
        let data = match proto::SourceData::decode(record) {
            Ok(d) => d,
            Err(e) => {
                self.undecoded += 1;
                self.first_undecoded.get_or_insert((offset, e.to_string()));
                return;
            }
        };
        if !data.binary.is_empty() {
            self.binaries += 1;
            self.cubins.entry(data.reference).or_insert(data.binary);
        }
        for file in data.files.map(|list| list.files).unwrap_or_default() {
            let index = self.file_index(file);
            let module = self.modules.entry(data.reference).or_default();
            if !module.contains(&index) {
                module.push(index);
            }
        }
    }

    /// The index of `file` in the profile's list, adding it when its path is new.
    fn file_index(&mut self, file: proto::EmbeddedFile) -> usize {
        let path = String::from_utf8_lossy(&file.path).into_owned();
        let (text, invalid_at) = decode_text(file.text);
        if let Some(&index) = self.by_path.get(&path) {
            if self.files[index].text != text {
                self.notes.push(format!("embedded source file {path} is stored twice with different text: kept the first"));
            }
            return index;
        }
        if let Some(at) = invalid_at {
            self.notes.push(format!(
                "embedded source file {path} is not UTF-8 (first invalid byte at offset {at} of the file): decoded \
                 lossily, invalid bytes read as U+FFFD"
            ));
        }
        self.by_path.insert(path.clone(), self.files.len());
        self.files.push(SourceFile { path, text });
        self.files.len() - 1
    }

    /// The files of the module `reference` names (none for a launch without one).
    pub(super) fn files_of(&self, reference: Option<u64>) -> Vec<usize> {
        reference.and_then(|r| self.modules.get(&r)).cloned().unwrap_or_default()
    }

    /// The cubin of the module `reference` names.
    pub(super) fn cubin_of(&self, reference: Option<u64>) -> Option<&[u8]> {
        reference.and_then(|r| self.cubins.get(&r)).map(|b| b.as_ref())
    }

    /// The profile's embedded files; what was skipped or decoded lossily goes to `notes`.
    pub(super) fn finish(self, notes: &mut Vec<String>) -> Vec<SourceFile> {
        if self.binaries > 0 {
            notes.push(format!("read {} embedded binary record(s) (the modules' cubins) for their line tables only", self.binaries));
        }
        if let Some((offset, error)) = self.first_undecoded {
            notes.push(format!(
                "skipped {} embedded source record(s) that did not decode (the first at byte {offset}: {error}); \
                 their source files are missing",
                self.undecoded
            ));
        }
        notes.extend(self.notes);
        self.files
    }
}

/// The text of an embedded file, and where its first invalid UTF-8 byte is when it is not UTF-8
/// (then decoded lossily).
fn decode_text(bytes: Vec<u8>) -> (String, Option<usize>) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(at))
        }
    }
}
