//! Reading `--source FILE|DIR`: the CUDA and Python files under a path, each checked to be UTF-8,
//! not too large and parseable; what fails is skipped with a warning naming it.

use crate::parse;
use crate::{CodeFile, Language};
use std::path::{Path, PathBuf};

/// Files larger than this are skipped (generated or amalgamated sources, not a user's kernel).
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// A directory with more source files than this is read up to here, with a warning.
pub const MAX_FILES: usize = 2_000;
/// A file with more than this share of its bytes inside tree-sitter ERROR nodes does not parse.
const MAX_ERROR_SHARE: f64 = 0.25;
/// Directory names that hold build outputs, environments or dependencies, never user sources.
const SKIPPED_DIRS: &[&str] = &[
    "build",
    "builds",
    "target",
    "node_modules",
    "__pycache__",
    "dist",
    "venv",
    "env",
    "site-packages",
    "CMakeFiles",
    "third_party",
    "_deps",
];

/// Reads the source files at `path` (one file, or a directory searched recursively), returning
/// the files read and a warning for each file or directory that was skipped.
pub fn read_user_sources(path: &Path) -> (Vec<CodeFile>, Vec<String>) {
    let mut warnings = Vec::new();
    let candidates = if path.is_dir() {
        let mut found = Vec::new();
        collect_dir(path, &mut found, &mut warnings);
        if found.len() > MAX_FILES {
            warnings.push(format!(
                "{} has more than {MAX_FILES} source files; stopped after the first {MAX_FILES} (point --source at the kernel's directory)",
                path.display()
            ));
            found.truncate(MAX_FILES);
        }
        found
    } else if path.is_file() {
        vec![path.to_path_buf()]
    } else {
        warnings.push(format!("{}: no such file or directory", path.display()));
        Vec::new()
    };
    let mut files = Vec::new();
    for candidate in candidates {
        match read_one(&candidate) {
            Ok(file) => files.push(file),
            Err(why) => warnings.push(format!("skipped {}: {why}", candidate.display())),
        }
    }
    (files, warnings)
}

/// Collects source files under `dir` in sorted order, stopping once past [`MAX_FILES`].
fn collect_dir(dir: &Path, found: &mut Vec<PathBuf>, warnings: &mut Vec<String>) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(error) => {
                warnings.push(format!("skipped directory {}: {error}", current.display()));
                continue;
            }
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|entry| entry.ok().map(|entry| entry.path())).collect();
        entries.sort();
        let mut subdirs = Vec::new();
        for entry in entries {
            let name = entry.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
            let Ok(kind) = std::fs::symlink_metadata(&entry).map(|meta| meta.file_type()) else { continue };
            if kind.is_dir() {
                let skipped = name.starts_with('.') || SKIPPED_DIRS.contains(&name.as_str()) || name.starts_with("cmake-build");
                if !skipped {
                    subdirs.push(entry);
                }
            } else if (kind.is_file() || kind.is_symlink()) && Language::of_path(&name).is_some() && entry.is_file() {
                found.push(entry);
                if found.len() > MAX_FILES {
                    return;
                }
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
}

/// Reads and checks one file.
fn read_one(path: &Path) -> Result<CodeFile, String> {
    let shown = path.display().to_string();
    let language = Language::of_path(&shown).ok_or("not a CUDA, C++ or Python source file")?;
    let size = std::fs::metadata(path).map_err(|error| error.to_string())?.len();
    if size > MAX_FILE_BYTES {
        return Err(format!("{size} bytes is larger than the {} MiB keet reads", MAX_FILE_BYTES / (1024 * 1024)));
    }
    let bytes = std::fs::read(path).map_err(|error| error.to_string())?;
    let text = String::from_utf8(bytes)
        .map_err(|error| format!("not UTF-8 text (invalid byte at offset {})", error.utf8_error().valid_up_to()))?;
    let tree = parse::parse(language, &text).ok_or("the parser gave no tree")?;
    let share = parse::error_share(&tree, text.len());
    if share > MAX_ERROR_SHARE {
        return Err(format!("does not parse as {language:?} ({:.0}% of it is syntax errors)", share * 100.0));
    }
    Ok(CodeFile { path: shown, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }

    #[test]
    fn reads_a_directory_skipping_what_cannot_be_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(&root.join("src/tiles.cu"), include_bytes!("../tests/fixtures/tiles.cu"));
        write(&root.join("src/kernels/softmax.py"), include_bytes!("../tests/fixtures/softmax_triton.py"));
        write(&root.join("src/latin1.cu"), b"// caf\xe9\n__global__ void k(int *x) {}\n");
        let mut huge = b"__global__ void big(int *x) {}\n".to_vec();
        huge.resize(MAX_FILE_BYTES as usize + 10, b'\n');
        write(&root.join("src/huge.cu"), &huge);
        write(&root.join("src/garbage.cu"), "}}}} ))) ;; <<<>>> @@@ ### !!! \n".repeat(50).as_bytes());
        write(&root.join("build/generated.cu"), b"__global__ void gen() {}\n");
        write(&root.join(".hidden/k.cu"), b"__global__ void hidden() {}\n");
        write(&root.join("src/notes.txt"), b"not source\n");
        let (files, warnings) = read_user_sources(root);
        let names: Vec<&str> = files.iter().map(|file| file.path.rsplit('/').next().unwrap_or("")).collect();
        assert_eq!(names, vec!["tiles.cu", "softmax.py"], "a directory's files come before its subdirectories'");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings.iter().any(|warning| warning.contains("latin1.cu") && warning.contains("not UTF-8")));
        assert!(warnings.iter().any(|warning| warning.contains("huge.cu") && warning.contains("larger than the 2 MiB")));
        assert!(warnings.iter().any(|warning| warning.contains("garbage.cu") && warning.contains("does not parse")));
    }

    #[test]
    fn reads_one_file_and_reports_a_missing_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tiles.cu");
        write(&file, include_bytes!("../tests/fixtures/tiles.cu"));
        let (files, warnings) = read_user_sources(&file);
        assert_eq!((files.len(), warnings.len()), (1, 0));
        let (files, warnings) = read_user_sources(&dir.path().join("missing.cu"));
        assert!(files.is_empty());
        assert!(warnings[0].ends_with("no such file or directory"));
    }

    #[test]
    fn stops_after_too_many_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        for index in 0..=MAX_FILES {
            write(&dir.path().join(format!("k{index:04}.py")), b"x = 1\n");
        }
        let (files, warnings) = read_user_sources(dir.path());
        assert_eq!(files.len(), MAX_FILES);
        assert!(warnings.iter().any(|warning| warning.contains("more than 2000 source files")), "{warnings:?}");
    }
}
