//! How keet creates files on a shared machine: caches are private (folder 0700, file 0600, created
//! so and tightened with a note when found looser), and reports follow the user's umask as `cp` or
//! `>` would (0644 under umask 022, 0600 under 077), written atomically (temp file + rename, so a
//! reader never sees half a report and a failed write leaves no partial file).
//!
//! Caches hold kernel names, source lines and analyses of possibly proprietary code; reports are
//! written for someone to read, often a colleague.

use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of a cache folder keet creates or owns: the owner alone may list and enter it.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of a cache file (and SQLite's `-wal`/`-shm` beside it, which take the file's mode).
pub const PRIVATE_FILE_MODE: u32 = 0o600;
/// Mode asked for a new report; the process umask takes its bits away, as for `>`.
const NEW_FILE_MODE: u32 = 0o666;

/// The permission bits (`rwxrwxrwx`) of `path`.
pub fn mode_of(path: &Path) -> io::Result<u32> {
    Ok(fs::metadata(path)?.permissions().mode() & 0o777)
}

/// Creates `dir` and any missing parents with mode 0700 (each folder created here; existing ones
/// are left as they are).
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(PRIVATE_DIR_MODE).create(dir)
}

/// What [`make_private`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tightened {
    /// Already private (no bits for group or others).
    Already,
    /// It was `from` (others or the group could use it); now `to`.
    Changed { from: u32, to: u32 },
}

/// Takes the group's and others' bits off `path` (a folder gets exactly 0700, a file 0600) when it
/// has any. An error when the mode cannot be changed (another user's file).
pub fn make_private(path: &Path) -> io::Result<Tightened> {
    let meta = fs::metadata(path)?;
    let from = meta.permissions().mode() & 0o777;
    if from & 0o077 == 0 {
        return Ok(Tightened::Already);
    }
    let to = if meta.is_dir() { PRIVATE_DIR_MODE } else { PRIVATE_FILE_MODE };
    fs::set_permissions(path, Permissions::from_mode(to))?;
    Ok(Tightened::Changed { from, to })
}

/// [`make_private`] with the outcome on standard error: a note when the mode was tightened, a
/// warning when it could not be (the caller goes on: the data is no less private than before).
/// `what` names the thing (`cache`, `cache folder`).
pub fn make_private_noting(path: &Path, what: &str) {
    match make_private(path) {
        Ok(Tightened::Already) => {}
        Ok(Tightened::Changed { from, to }) => {
            eprintln!("note: {what} {} was mode {from:04o} (readable by other users); made it {to:04o}", path.display());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => eprintln!("warning: {what} {} may be readable by other users and its mode could not be changed: {e}", path.display()),
    }
}

/// Creates the empty file `path` with mode 0600 when it does not exist (`Ok(true)`); an existing
/// file is left alone (`Ok(false)`). SQLite opens an empty file as an empty database and gives
/// its `-wal` and `-shm` files the database file's mode, so all three are private.
pub fn create_private_file(path: &Path) -> io::Result<bool> {
    match OpenOptions::new().write(true).create_new(true).mode(PRIVATE_FILE_MODE).open(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, renamed over `path`.
/// A new file gets the mode the umask gives (`0666 & !umask`, as `>` does); an existing file keeps
/// its mode (as `>` and `cp` onto it do). A path that is not a regular file (`/dev/null`, a pipe,
/// a terminal) is written in place: renaming over it would replace the device with a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |out| out.write_all(bytes))
}

/// [`write_atomic`] with the content streamed by `write` (a large JSON report is never held
/// whole in memory): the file appears, complete, only when `write` succeeds.
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    if fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let mut out = io::BufWriter::new(OpenOptions::new().write(true).open(path)?);
        write(&mut out)?;
        return out.flush();
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp =
        tempfile::Builder::new().prefix(".keet-").suffix(".tmp").permissions(Permissions::from_mode(NEW_FILE_MODE)).tempfile_in(dir)?;
    if let Some(existing) = fs::metadata(path).ok().filter(|m| m.is_file()) {
        tmp.as_file().set_permissions(Permissions::from_mode(existing.permissions().mode() & 0o777))?;
    }
    let mut out = io::BufWriter::new(tmp);
    write(&mut out)?;
    out.flush()?;
    let tmp = out.into_inner().map_err(|e| e.into_error())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        create_private_dir_all(&deep).unwrap();
        assert_eq!(mode_of(&deep).unwrap(), 0o700);
        assert_eq!(mode_of(&dir.path().join("a")).unwrap(), 0o700);
        let f = deep.join("x.sqlite3");
        assert!(create_private_file(&f).unwrap());
        assert_eq!(mode_of(&f).unwrap(), 0o600);
        assert!(!create_private_file(&f).unwrap());
    }

    #[test]
    fn tightening_reports_what_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.sqlite3");
        fs::write(&f, b"").unwrap();
        fs::set_permissions(&f, Permissions::from_mode(0o644)).unwrap();
        assert_eq!(make_private(&f).unwrap(), Tightened::Changed { from: 0o644, to: 0o600 });
        assert_eq!(make_private(&f).unwrap(), Tightened::Already);
        let d = dir.path().join("d");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, Permissions::from_mode(0o755)).unwrap();
        assert_eq!(make_private(&d).unwrap(), Tightened::Changed { from: 0o755, to: 0o700 });
        assert_eq!(mode_of(&d).unwrap(), 0o700);
    }

    #[test]
    fn atomic_write_keeps_an_existing_files_mode_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("report.txt");
        fs::write(&f, b"old").unwrap();
        fs::set_permissions(&f, Permissions::from_mode(0o640)).unwrap();
        write_atomic(&f, b"new").unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"new");
        assert_eq!(mode_of(&f).unwrap(), 0o640);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("report.txt")]);
    }

    /// `-o /dev/null` or `-o` a pipe writes into it: the device or pipe is still there afterwards,
    /// not replaced by a regular file (which broke every later reader of /dev/null on the machine).
    #[test]
    fn atomic_write_to_a_pipe_writes_into_it() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(&fifo).unwrap())
        };
        write_atomic(&fifo, b"report").unwrap();
        assert_eq!(reader.join().unwrap(), b"report");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the pipe was replaced");
    }
}
