//! GGUF files: the memory map, the header (metadata and tensor table) parsed and checked against
//! the file size, and the metadata accessors. Parsing only: which implementation runs a file is
//! `loader`'s choice, so `fast` and `loader` both read GGUF from here and the arrows run one way.

use std::collections::HashMap;
use std::fs::File;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file;

use super::model::LlmError;

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

/// A GGUF file, memory-mapped, with its header (metadata and tensor table) parsed and checked
/// against the file size.
///
/// The file is mapped rather than read: the header is parsed from memory (no small reads), and
/// tensor data is copied from the map straight into the model's own layout, so the weights are
/// read from the page cache once and never buffered twice.
pub struct GgufFile {
    pub path: PathBuf,
    pub content: gguf_file::Content,
    map: std::sync::Arc<memmap2::Mmap>,
}

impl GgufFile {
    /// Maps the file and reads and checks the header; a file that is not GGUF, or is cut short, is
    /// a clear error.
    pub fn open(path: &Path) -> Result<Self, LlmError> {
        let corrupt = |why: String| {
            err(format!(
                "model file {} is corrupt or incomplete: {why}. Reinstall it (`keet model install` for the \
                 default model) or point --model at a good copy",
                path.display()
            ))
        };
        let f = File::open(path).map_err(|e| err(format!("cannot open model file {}: {e}", path.display())))?;
        // SAFETY: the map is read-only and keet never writes model files; as with any mapped file,
        // another process truncating it while keet runs would fault (installers write a new file
        // and rename it, which leaves this mapping intact).
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| err(format!("cannot map model file {}: {e}", path.display())))?;
        let file_len = map.len() as u64;
        let content = gguf_file::Content::read(&mut Cursor::new(&map[..]))
            .map_err(|e| corrupt(format!("bad GGUF header ({})", crate::model::candle_message(&e))))?;
        // The tensor that reaches furthest into the file: (end, name, start).
        let mut last: Option<(u64, &str, u64)> = None;
        for (name, ti) in &content.tensor_infos {
            let elems = ti.shape.elem_count();
            let bs = ti.ggml_dtype.block_size();
            if bs == 0 || elems % bs != 0 {
                return Err(corrupt(format!("tensor {name} has a shape that does not fit its type {:?}", ti.ggml_dtype)));
            }
            let size = (elems / bs * ti.ggml_dtype.type_size()) as u64;
            let start = content.tensor_data_offset.saturating_add(ti.offset);
            let end = start.saturating_add(size);
            if last.is_none_or(|l| end > l.0) {
                last = Some((end, name, start));
            }
        }
        let Some((end, name, start)) = last else { return Err(corrupt("no tensors".into())) };
        if end > file_len {
            return Err(corrupt(format!("tensor {name} occupies bytes {start}..{end} but the file has {file_len} bytes (truncated?)")));
        }
        Ok(GgufFile { path: path.to_path_buf(), content, map: std::sync::Arc::new(map) })
    }

    /// A GGUF model held in memory (an anonymous map), not read from a file: `label` stands for
    /// the path in messages and reports. The tensor table must fit the map (as [`GgufFile::open`]
    /// checks for files).
    pub fn from_memory(label: &str, content: gguf_file::Content, map: memmap2::Mmap) -> Result<Self, LlmError> {
        for (name, ti) in &content.tensor_infos {
            let end = content.tensor_data_offset + ti.offset + super::footprint::ggml_bytes(ti.ggml_dtype, ti.shape.elem_count());
            if end > map.len() as u64 {
                return Err(err(format!("in-memory model {label}: tensor {name} ends at byte {end}, past {}", map.len())));
            }
        }
        Ok(GgufFile { path: PathBuf::from(label), content, map: std::sync::Arc::new(map) })
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The file's map, shared: a model may keep tensors in place (no copy) by holding it.
    pub fn shared_map(&self) -> std::sync::Arc<memmap2::Mmap> {
        self.map.clone()
    }

    pub fn metadata(&self) -> &HashMap<String, gguf_file::Value> {
        &self.content.metadata
    }

    pub fn md_str(&self, key: &str) -> Option<String> {
        self.content.metadata.get(key).and_then(|v| v.to_string().ok()).cloned()
    }

    pub fn md_u32(&self, key: &str) -> Option<u32> {
        self.content.metadata.get(key).and_then(|v| v.to_u32().ok())
    }

    pub fn architecture(&self) -> String {
        self.md_str("general.architecture").unwrap_or_default()
    }

    pub fn context_length(&self) -> Option<usize> {
        let arch = self.architecture();
        self.md_u32(&format!("{arch}.context_length")).map(|v| v as usize)
    }
}
