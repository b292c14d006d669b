//! The analysis cache: one SQLite file (WAL mode) in keet's cache directory that keeps every
//! kernel analysis under a key covering everything the answer depends on (the launch's facts, the
//! model file's hash, the prompt templates, the decoding settings and keet's version), so a repeat
//! run answers without loading the model.
//!
//! Guarantees:
//! * every write is one `BEGIN IMMEDIATE` transaction: a killed process leaves either the whole
//!   entry or nothing (SQLite's journal rolls an interrupted transaction back on the next open);
//! * several processes may share one file: readers never block (WAL), writers queue on the lock
//!   (`busy_timeout` of [`BUSY_TIMEOUT`], then a few retries), nothing is lost;
//! * a file that is not a keet cache, or one written by a newer keet (schema `user_version`
//!   above [`SCHEMA_VERSION`]), gives a [`CacheError`] naming the path, never a panic.
//!
//! Private by default (see [`crate::files`]): a folder the cache creates is 0700 and the file 0600
//! (SQLite's `-wal` and `-shm` take the file's mode); keet's own cache folder and an existing cache
//! file found readable by others are tightened, with a note on standard error. A folder named by
//! `--cache`/`KEET_CACHE` that exists already is the user's and keeps its mode.
//!
//! Replacing an entry (`--refresh`) deletes the old row and inserts a new one, so the refreshed
//! analysis gets a new id and sorts as the newest in [`Cache::history`]. Ids are never reused
//! (`AUTOINCREMENT`): an old id shown by `keet history` never names a different analysis later.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Schema version kept in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 1;
/// `PRAGMA application_id` of keet caches ("keet" in ASCII).
pub const APPLICATION_ID: i64 = 0x6B65_6574;
/// How long one statement waits for another process's write lock before failing with BUSY.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Extra attempts after a BUSY/LOCKED failure (each after the full busy timeout or a short backoff).
const BUSY_RETRIES: u32 = 4;
/// Environment variable overriding the cache path.
pub const CACHE_ENV: &str = "KEET_CACHE";

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache {}: cannot open: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cache {}: cannot create its directory: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cache {}: cannot create the file: {source}", path.display())]
    CreateFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cache {}: read-only (the file or its folder cannot be written)", path.display())]
    ReadOnly { path: PathBuf },
    #[error("cache {}: not a keet cache ({detail}); delete it or pass another --cache path", path.display())]
    NotACache { path: PathBuf, detail: String },
    #[error("cache {}: written by a newer keet (schema version {found}, this keet reads up to {supported}); upgrade keet or pass another --cache path", path.display())]
    NewerSchema { path: PathBuf, found: i64, supported: i64 },
    #[error("cache {}: corrupt ({detail}); it was not merged", path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("cache {}: is the destination of the merge too", path.display())]
    SourceIsDestination { path: PathBuf },
    #[error("cache {}: cannot replace it: {source}", path.display())]
    Persist {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cache {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

impl CacheError {
    /// Whether the error says the cache cannot be created or written where it is (a folder the
    /// user cannot write, a parent that is a file, a read-only file system), as opposed to a file
    /// that is there but is not a usable keet cache.
    pub fn is_unwritable(&self) -> bool {
        match self {
            CacheError::CreateDir { .. } | CacheError::CreateFile { .. } | CacheError::ReadOnly { .. } | CacheError::Open { .. } => true,
            CacheError::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::PermissionDenied)
            ),
            _ => false,
        }
    }
}

/// keet's own cache folder: `<cache dir>/keet` (`~/.cache/keet` on Linux). Kept 0700.
pub fn default_cache_dir() -> PathBuf {
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("keet")
}

/// The cache file keet uses: `$KEET_CACHE` if set (and not empty), else
/// `<cache dir>/keet/analyses.sqlite3` (`~/.cache/keet/...` on Linux).
pub fn default_cache_path() -> PathBuf {
    match std::env::var_os(CACHE_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => default_cache_dir().join("analyses.sqlite3"),
    }
}

/// Makes the cache's folder and file private before SQLite opens it: missing folders are created
/// 0700, keet's own folder is tightened to 0700, a new file is created 0600 and an existing one
/// (with any `-wal`/`-shm` beside it) tightened to 0600, with a note.
fn prepare_private(path: &Path) -> Result<(), CacheError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::files::create_private_dir_all(dir).map_err(|source| {
            // "File exists" alone does not say which: name the part of the path that is a file.
            let file_in_the_way = dir.ancestors().find(|a| a.is_file());
            let source = match file_in_the_way {
                Some(f) => std::io::Error::other(format!("{} is a file, not a folder", f.display())),
                None => source,
            };
            CacheError::CreateDir { path: path.to_owned(), source }
        })?;
        if dir == default_cache_dir() {
            crate::files::make_private_noting(dir, "cache folder");
        }
    }
    let created = crate::files::create_private_file(path).map_err(|source| CacheError::CreateFile { path: path.to_owned(), source })?;
    if !created && path.is_file() {
        crate::files::make_private_noting(path, "cache");
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            let side = PathBuf::from(side);
            if side.is_file() {
                // The main file's note covers these.
                let _ = crate::files::make_private(&side);
            }
        }
    }
    Ok(())
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// Everything a cached analysis depends on. Each part must be canonical (same input → same
/// bytes): callers serialise with sorted keys / fixed field order.
#[derive(Debug, Clone, Copy)]
pub struct KeyParts<'a> {
    /// Canonical JSON of the launch's facts and identity (kernel name, launch shape, device).
    pub facts_json: &'a str,
    /// SHA-256 of the model file; `"none"` for rule-only analyses.
    pub model_sha256: &'a str,
    /// SHA-256 over the prompt templates used.
    pub prompt_templates_sha256: &'a str,
    /// Canonical JSON of the decoding settings (sampler, seed, max tokens, ...).
    pub decoding_json: &'a str,
    /// keet's version (`env!("CARGO_PKG_VERSION")`).
    pub keet_version: &'a str,
}

/// A cache key: lower-case hex SHA-256 over the length-prefixed [`KeyParts`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CacheKey(String);

impl CacheKey {
    /// Hashes the parts, each as name, byte length (u64 little-endian) and bytes, after a domain
    /// tag, so no two different part lists hash the same byte stream.
    pub fn new(parts: &KeyParts) -> CacheKey {
        let mut h = Sha256::new();
        h.update(b"keet.cache.key/1\0");
        for (name, value) in [
            ("facts", parts.facts_json),
            ("model_sha256", parts.model_sha256),
            ("prompt_templates_sha256", parts.prompt_templates_sha256),
            ("decoding", parts.decoding_json),
            ("keet_version", parts.keet_version),
        ] {
            for field in [name.as_bytes(), value.as_bytes()] {
                h.update((field.len() as u64).to_le_bytes());
                h.update(field);
            }
        }
        CacheKey(hex::encode(h.finalize()))
    }

    /// A key from its stored hex form (as shown by `keet history --format json`).
    pub fn from_hex(s: impl Into<String>) -> CacheKey {
        CacheKey(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What `keet history` lists about an analysis.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EntryMeta {
    /// The profile file the launch came from.
    pub file: String,
    /// Kernel name (demangled).
    pub kernel: String,
    /// Model name, or `"none"` for rule-only analyses.
    pub model: String,
    /// One-line verdict.
    pub verdict: String,
}

/// One row of [`Cache::history`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub id: i64,
    /// UTC, ISO-8601 (`2026-11-22T17:52:14Z`).
    pub created_utc: String,
    pub key: CacheKey,
    pub keet_version: String,
    #[serde(flatten)]
    pub meta: EntryMeta,
}

/// A stored analysis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub id: i64,
    pub key: CacheKey,
    /// UTC, ISO-8601 (`2026-11-22T17:52:14Z`).
    pub created_utc: String,
    pub keet_version: String,
    pub meta: EntryMeta,
    /// The validated findings (a [`crate::explain::report::CachedFindings`] as JSON).
    pub findings_json: String,
    /// A full single-kernel [`crate::explain::report::ExplainReport`] as JSON (what `keet show` prints).
    pub report_json: String,
}

const SCHEMA_V1: &str = "
CREATE TABLE analyses (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT UNIQUE NOT NULL,
    created_utc TEXT NOT NULL,
    file TEXT NOT NULL,
    kernel TEXT NOT NULL,
    model TEXT NOT NULL,
    verdict TEXT NOT NULL,
    keet_version TEXT NOT NULL,
    findings_json TEXT NOT NULL,
    report_json TEXT NOT NULL
);
CREATE INDEX analyses_created ON analyses(created_utc);
";

const ENTRY_COLUMNS: &str = "id, key, created_utc, keet_version, file, kernel, model, verdict, findings_json, report_json";

/// An open cache file. Cheap to share between threads (`Sync`; statements are serialised on an
/// internal mutex) and between processes (SQLite locking).
pub struct Cache {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("path", &self.path).finish_non_exhaustive()
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked))
}

fn is_not_a_db(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt))
}

/// Runs `f`, retrying a few times with a growing backoff while SQLite reports BUSY/LOCKED.
fn with_busy_retry<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut attempt = 0u32;
    loop {
        match f() {
            Err(e) if is_busy(&e) && attempt < BUSY_RETRIES => {
                attempt += 1;
                // Jitter from the clock so processes that collided do not collide again in step.
                let jitter = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos() % 50).unwrap_or(0);
                std::thread::sleep(Duration::from_millis(50 * u64::from(attempt) + u64::from(jitter)));
            }
            r => return r,
        }
    }
}

impl Cache {
    /// Opens (creating if needed, with its parent directories) the cache at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Cache, CacheError> {
        let path = path.as_ref().to_path_buf();
        prepare_private(&path)?;
        let conn = Connection::open(&path).map_err(|source| CacheError::Open { path: path.clone(), source })?;
        let cache = Cache { path, conn: Mutex::new(conn) };
        cache.init()?;
        Ok(cache)
    }

    /// Opens the cache at `path` for reading and writing, or, when it cannot be written there
    /// ([`CacheError::is_unwritable`]: a folder the user cannot write, a read-only file), warns on
    /// standard error naming the path and gives `None`: the run goes on without the cache, as
    /// with `--no-cache`. Other errors (a file that is not a keet cache) are returned.
    pub fn open_or_skip(path: impl AsRef<Path>) -> Result<Option<Cache>, CacheError> {
        let path = path.as_ref();
        let opened = Cache::open(path).and_then(|c| {
            let read_only = c.conn().is_readonly(rusqlite::MAIN_DB).unwrap_or(false);
            if read_only {
                Err(CacheError::ReadOnly { path: path.to_owned() })
            } else {
                Ok(c)
            }
        });
        match opened {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.is_unwritable() => {
                eprintln!("warning: {e}; going on without the cache (as with --no-cache)");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Opens the cache at `path` only if the file exists (for read-only commands such as
    /// `keet history`, which should not create an empty cache).
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Option<Cache>, CacheError> {
        if path.as_ref().exists() {
            Cache::open(path).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The file this cache lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves the connection usable (SQLite rolls back the
        // unfinished transaction when the Transaction guard drops), so ignore poisoning.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sql_err(&self, source: rusqlite::Error) -> CacheError {
        if is_not_a_db(&source) {
            CacheError::NotACache { path: self.path.clone(), detail: source.to_string() }
        } else {
            CacheError::Sqlite { path: self.path.clone(), source }
        }
    }

    /// What the file holds: `Ok(true)` a current keet cache, `Ok(false)` an empty database (the
    /// schema is to be created), or the reason it cannot be used.
    fn check_schema(&self, conn: &Connection) -> Result<Result<bool, CacheError>, rusqlite::Error> {
        // One statement, so one read snapshot: separate statements could see the header from
        // before another process created the schema and the tables from after.
        let (version, app_id, objects): (i64, i64, i64) = conn.query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), (SELECT application_id FROM pragma_application_id),
                    (SELECT count(*) FROM sqlite_master)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let path = self.path.clone();
        Ok(if version == 0 {
            if objects > 0 || app_id != 0 {
                Err(CacheError::NotACache { path, detail: format!("an SQLite database with {objects} other schema objects") })
            } else {
                Ok(false)
            }
        } else if app_id != APPLICATION_ID {
            Err(CacheError::NotACache { path, detail: format!("SQLite application id {app_id:#x}, schema version {version}") })
        } else if version > SCHEMA_VERSION {
            Err(CacheError::NewerSchema { path, found: version, supported: SCHEMA_VERSION })
        } else {
            // (Older schema versions would be migrated here, in an IMMEDIATE transaction.)
            Ok(true)
        })
    }

    /// Connection settings, then: a current cache is only read (no write lock taken, so opening
    /// never waits on writers); a foreign file is rejected before anything is written to it; an
    /// empty file gets WAL mode and the schema, created in one transaction (checked again inside
    /// it, as another process may have just created it).
    fn init(&self) -> Result<(), CacheError> {
        let mut conn = self.conn();
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| self.sql_err(e))?;
        let current = with_busy_retry(|| self.check_schema(&conn)).map_err(|e| self.sql_err(e))??;
        // journal_mode=WAL is persistent in the file; switch only when needed (the switch takes an
        // exclusive lock, which several first-time openers may contend for).
        let mode: String = with_busy_retry(|| conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))).map_err(|e| self.sql_err(e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            let mode: String =
                with_busy_retry(|| conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))).map_err(|e| self.sql_err(e))?;
            if !mode.eq_ignore_ascii_case("wal") {
                // Some file systems cannot do WAL; the rollback journal still keeps writes atomic.
                eprintln!("warning: cache {}: journal mode {mode} (WAL unavailable)", self.path.display());
            }
        }
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(|e| self.sql_err(e))?;
        if current {
            return Ok(());
        }
        with_busy_retry(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            match self.check_schema(&tx)? {
                Ok(true) => {}
                Ok(false) => {
                    tx.execute_batch(SCHEMA_V1)?;
                    tx.pragma_update(None, "application_id", APPLICATION_ID)?;
                    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
                }
                Err(e) => return Ok(Err(e)),
            }
            tx.commit()?;
            Ok(Ok(()))
        })
        .map_err(|e| self.sql_err(e))?
    }

    /// The stored analysis for `key`, if any.
    pub fn get(&self, key: &CacheKey) -> Result<Option<Entry>, CacheError> {
        let conn = self.conn();
        with_busy_retry(|| {
            conn.query_row(&format!("SELECT {ENTRY_COLUMNS} FROM analyses WHERE key = ?1"), [key.as_str()], row_to_entry).optional()
        })
        .map_err(|e| self.sql_err(e))
    }

    /// Stores an analysis under `key`, replacing any entry with that key (`--refresh`), in one
    /// transaction. Returns the new entry's id.
    pub fn put(&self, key: &CacheKey, meta: &EntryMeta, findings_json: &str, report_json: &str) -> Result<i64, CacheError> {
        let mut conn = self.conn();
        with_busy_retry(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute("DELETE FROM analyses WHERE key = ?1", [key.as_str()])?;
            let id: i64 = tx.query_row(
                "INSERT INTO analyses (key, created_utc, file, kernel, model, verdict, keet_version, findings_json, report_json)
                 VALUES (?1, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
                params![
                    key.as_str(),
                    meta.file,
                    meta.kernel,
                    meta.model,
                    meta.verdict,
                    env!("CARGO_PKG_VERSION"),
                    findings_json,
                    report_json
                ],
                |r| r.get(0),
            )?;
            tx.commit()?;
            Ok(id)
        })
        .map_err(|e| self.sql_err(e))
    }

    /// Past analyses, newest first, at most `limit` (all when `None`). `filter` keeps rows whose
    /// file, kernel, model or verdict contains it (case-insensitive for ASCII).
    pub fn history(&self, limit: Option<usize>, filter: Option<&str>) -> Result<Vec<HistoryRow>, CacheError> {
        let conn = self.conn();
        let limit = limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX)).unwrap_or(-1);
        let filter = filter.filter(|f| !f.is_empty());
        with_busy_retry(|| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, created_utc, key, keet_version, file, kernel, model, verdict FROM analyses
                 WHERE ?1 IS NULL
                    OR instr(lower(file), lower(?1)) > 0 OR instr(lower(kernel), lower(?1)) > 0
                    OR instr(lower(model), lower(?1)) > 0 OR instr(lower(verdict), lower(?1)) > 0
                 ORDER BY id DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![filter, limit], |r| {
                Ok(HistoryRow {
                    id: r.get(0)?,
                    created_utc: r.get(1)?,
                    key: CacheKey(r.get(2)?),
                    keet_version: r.get(3)?,
                    meta: EntryMeta { file: r.get(4)?, kernel: r.get(5)?, model: r.get(6)?, verdict: r.get(7)? },
                })
            })?;
            rows.collect()
        })
        .map_err(|e| self.sql_err(e))
    }

    /// The analysis with this id, if any.
    pub fn show(&self, id: i64) -> Result<Option<Entry>, CacheError> {
        let conn = self.conn();
        with_busy_retry(|| conn.query_row(&format!("SELECT {ENTRY_COLUMNS} FROM analyses WHERE id = ?1"), [id], row_to_entry).optional())
            .map_err(|e| self.sql_err(e))
    }

    /// Number of stored analyses.
    pub fn len(&self) -> Result<usize, CacheError> {
        let conn = self.conn();
        with_busy_retry(|| conn.query_row("SELECT count(*) FROM analyses", [], |r| r.get::<_, i64>(0)))
            .map(|n| n as usize)
            .map_err(|e| self.sql_err(e))
    }

    pub fn is_empty(&self) -> Result<bool, CacheError> {
        self.len().map(|n| n == 0)
    }

    /// SQLite's `PRAGMA quick_check` result (`"ok"` when the file is sound; faster than
    /// [`Cache::integrity_check`]).
    pub fn quick_check(&self) -> Result<String, CacheError> {
        let conn = self.conn();
        with_busy_retry(|| {
            let mut stmt = conn.prepare("PRAGMA quick_check")?;
            let lines: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
            Ok(lines.join("\n"))
        })
        .map_err(|e| self.sql_err(e))
    }

    /// SQLite's `PRAGMA integrity_check` result (`"ok"` when the file is sound).
    pub fn integrity_check(&self) -> Result<String, CacheError> {
        let conn = self.conn();
        with_busy_retry(|| {
            let mut stmt = conn.prepare("PRAGMA integrity_check")?;
            let lines: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
            Ok(lines.join("\n"))
        })
        .map_err(|e| self.sql_err(e))
    }
}

/// What [`merge_into`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MergeStats {
    /// Entries copied into the destination.
    pub added: usize,
    /// Entries whose key the destination (or an earlier source) already had.
    pub present: usize,
    /// Entries in the destination afterwards.
    pub total: usize,
}

/// Opens `path` read-only as a keet cache: a foreign file, a newer schema or a corrupt file
/// (`PRAGMA quick_check`) is an error naming it. Nothing is written to it.
fn open_source(path: &Path) -> Result<Cache, CacheError> {
    use rusqlite::OpenFlags;
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|source| CacheError::Open { path: path.to_owned(), source })?;
    let src = Cache { path: path.to_owned(), conn: Mutex::new(conn) };
    {
        let conn = src.conn();
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| src.sql_err(e))?;
        match with_busy_retry(|| src.check_schema(&conn)).map_err(|e| src.sql_err(e))? {
            Ok(true) => {}
            Ok(false) => return Err(CacheError::NotACache { path: path.to_owned(), detail: "an empty database".into() }),
            Err(e) => return Err(e),
        }
    }
    let check = src.quick_check()?;
    if check != "ok" {
        return Err(CacheError::Corrupt { path: path.to_owned(), detail: check.lines().next().unwrap_or_default().to_string() });
    }
    Ok(src)
}

/// Folds every entry of the caches at `sources` into the cache at `into`, in one transaction
/// (a killed or failed merge leaves `into` as it was; a new `into` is built beside it and renamed
/// into place). Entries are keyed by content: a key `into` already has is kept as it is, so
/// merging twice, or overlapping caches, adds nothing twice and loses nothing. Every source is
/// checked before anything is written (a foreign, newer-schema or corrupt source is an error) and
/// only read. `progress(source, entries)` is called as each source starts.
pub fn merge_into(into: &Path, sources: &[PathBuf], mut progress: impl FnMut(&Path, usize)) -> Result<MergeStats, CacheError> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let srcs: Vec<Cache> = sources
        .iter()
        .map(|p| {
            if into.exists() && canon(p) == canon(into) {
                return Err(CacheError::SourceIsDestination { path: p.clone() });
            }
            open_source(p)
        })
        .collect::<Result<_, _>>()?;
    // A destination that does not exist yet is built under a temporary name and renamed at the
    // end, so a killed merge leaves no file behind.
    let fresh = !into.exists();
    let dir = into.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    crate::files::create_private_dir_all(dir).map_err(|source| CacheError::CreateDir { path: into.to_owned(), source })?;
    let tmp = if fresh {
        let t = tempfile::Builder::new()
            .prefix(".keet-cache-merge-")
            .suffix(".sqlite3")
            .tempfile_in(dir)
            .map_err(|source| CacheError::CreateDir { path: into.to_owned(), source })?;
        Some(t.into_temp_path())
    } else {
        None
    };
    let target: PathBuf = tmp.as_ref().map(|t| t.to_path_buf()).unwrap_or_else(|| into.to_owned());
    let dst = Cache::open(&target)?;
    let mut stats = MergeStats::default();
    {
        let mut conn = dst.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| dst.sql_err(e))?;
        for src in &srcs {
            let sconn = src.conn();
            let n: i64 = sconn.query_row("SELECT count(*) FROM analyses", [], |r| r.get(0)).map_err(|e| src.sql_err(e))?;
            progress(&src.path, n as usize);
            let mut read = sconn
                .prepare("SELECT key, created_utc, file, kernel, model, verdict, keet_version, findings_json, report_json FROM analyses ORDER BY id")
                .map_err(|e| src.sql_err(e))?;
            let mut insert = tx
                .prepare(
                    "INSERT INTO analyses (key, created_utc, file, kernel, model, verdict, keet_version, findings_json, report_json)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(key) DO NOTHING",
                )
                .map_err(|e| dst.sql_err(e))?;
            let mut rows = read.query([]).map_err(|e| src.sql_err(e))?;
            while let Some(r) = rows.next().map_err(|e| src.sql_err(e))? {
                let mut vals: Vec<String> = Vec::with_capacity(9);
                for i in 0..9 {
                    // A NULL or non-text column means the source is not what its schema says.
                    let v = r.get::<_, String>(i).map_err(|e| CacheError::Corrupt {
                        path: src.path.clone(),
                        detail: format!("entry {} column {i}: {e}", stats.added + stats.present + 1),
                    })?;
                    vals.push(v);
                }
                let added = insert.execute(rusqlite::params_from_iter(vals.iter())).map_err(|e| dst.sql_err(e))?;
                if added == 1 {
                    stats.added += 1;
                } else {
                    stats.present += 1;
                }
            }
        }
        stats.total = tx.query_row("SELECT count(*) FROM analyses", [], |r| r.get::<_, i64>(0)).map_err(|e| dst.sql_err(e))? as usize;
        tx.commit().map_err(|e| dst.sql_err(e))?;
    }
    drop(dst);
    if let Some(t) = tmp {
        // The last connection closed: SQLite checkpointed the WAL into the file.
        t.persist(into).map_err(|e| CacheError::Persist { path: into.to_owned(), source: e.error })?;
    }
    Ok(stats)
}

fn row_to_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    Ok(Entry {
        id: r.get(0)?,
        key: CacheKey(r.get(1)?),
        created_utc: r.get(2)?,
        keet_version: r.get(3)?,
        meta: EntryMeta { file: r.get(4)?, kernel: r.get(5)?, model: r.get(6)?, verdict: r.get(7)? },
        findings_json: r.get(8)?,
        report_json: r.get(9)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> KeyParts<'static> {
        KeyParts {
            facts_json: r#"{"kernel":"k","grid":[1,1,1]}"#,
            model_sha256: "abc",
            prompt_templates_sha256: "def",
            decoding_json: r#"{"seed":0}"#,
            keet_version: "0.1.0",
        }
    }

    fn meta(kernel: &str) -> EntryMeta {
        EntryMeta { file: "a.ncu-rep".into(), kernel: kernel.into(), model: "qwen".into(), verdict: "memory-bound".into() }
    }

    #[test]
    fn sha256_of_empty() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn key_is_stable_and_changes_with_every_part() {
        let base = CacheKey::new(&parts());
        assert_eq!(base, CacheKey::new(&parts()));
        assert_eq!(base.as_str().len(), 64);
        let variants = [
            KeyParts { facts_json: r#"{"kernel":"k","grid":[2,1,1]}"#, ..parts() },
            KeyParts { model_sha256: "none", ..parts() },
            KeyParts { prompt_templates_sha256: "deg", ..parts() },
            KeyParts { decoding_json: r#"{"seed":1}"#, ..parts() },
            KeyParts { keet_version: "0.1.1", ..parts() },
        ];
        let mut seen = std::collections::HashSet::new();
        seen.insert(base.clone());
        for v in &variants {
            assert!(seen.insert(CacheKey::new(v)), "{v:?} collided");
        }
    }

    #[test]
    fn key_fields_are_not_ambiguous() {
        // Moving bytes from one field to the next must change the key.
        let a = KeyParts { model_sha256: "ab", prompt_templates_sha256: "c", ..parts() };
        let b = KeyParts { model_sha256: "a", prompt_templates_sha256: "bc", ..parts() };
        assert_ne!(CacheKey::new(&a), CacheKey::new(&b));
    }

    #[test]
    fn round_trip_and_refresh_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/analyses.sqlite3");
        let cache = Cache::open(&path).unwrap();
        assert!(cache.is_empty().unwrap());
        let key = CacheKey::new(&parts());
        assert!(cache.get(&key).unwrap().is_none());
        let id = cache.put(&key, &meta("k"), r#"{"findings":[]}"#, r#"{"schema":"keet.explain/1"}"#).unwrap();
        let e = cache.get(&key).unwrap().unwrap();
        assert_eq!(e.id, id);
        assert_eq!(e.key, key);
        assert_eq!(e.meta, meta("k"));
        assert_eq!(e.findings_json, r#"{"findings":[]}"#);
        assert_eq!(e.report_json, r#"{"schema":"keet.explain/1"}"#);
        assert_eq!(e.keet_version, env!("CARGO_PKG_VERSION"));
        assert_eq!(e.created_utc.len(), "2026-11-22T17:52:14Z".len());
        assert!(e.created_utc.ends_with('Z') && e.created_utc.as_bytes()[10] == b'T', "{}", e.created_utc);
        assert_eq!(cache.show(id).unwrap().unwrap(), e);
        drop(cache);

        // Reopen: still there; a refresh replaces it (one entry, new content, new id).
        let cache = Cache::open(&path).unwrap();
        assert_eq!(cache.get(&key).unwrap().unwrap(), e);
        let id2 = cache.put(&key, &meta("k2"), "{}", "{}").unwrap();
        assert_ne!(id2, id);
        assert_eq!(cache.len().unwrap(), 1);
        assert!(cache.show(id).unwrap().is_none());
        let e2 = cache.get(&key).unwrap().unwrap();
        assert_eq!((e2.id, e2.meta.kernel.as_str(), e2.report_json.as_str()), (id2, "k2", "{}"));
        assert_eq!(cache.integrity_check().unwrap(), "ok");
    }

    #[test]
    fn history_is_newest_first_limited_and_filtered() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path().join("c.sqlite3")).unwrap();
        let mut ids = vec![];
        for i in 0..5 {
            let facts = format!("{{\"i\":{i}}}");
            let key = CacheKey::new(&KeyParts { facts_json: &facts, ..parts() });
            let kernel = if i % 2 == 0 { format!("gemm_{i}") } else { format!("Reduce_{i}") };
            ids.push(cache.put(&key, &meta(&kernel), "{}", "{}").unwrap());
        }
        let all = cache.history(None, None).unwrap();
        assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), ids.iter().rev().copied().collect::<Vec<_>>());
        assert_eq!(all[0].meta.kernel, "gemm_4");
        let two = cache.history(Some(2), None).unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[0].id, ids[4]);
        let reduce = cache.history(None, Some("reduce")).unwrap();
        assert_eq!(reduce.iter().map(|r| r.meta.kernel.as_str()).collect::<Vec<_>>(), ["Reduce_3", "Reduce_1"]);
        assert!(cache.history(None, Some("no such thing")).unwrap().is_empty());
        assert_eq!(cache.history(None, Some("")).unwrap().len(), 5);
        // Filters match file, model and verdict too; LIKE wildcards are literal.
        assert_eq!(cache.history(None, Some("MEMORY-bound")).unwrap().len(), 5);
        assert!(cache.history(None, Some("%")).unwrap().is_empty());
        // Refreshing an old entry makes it the newest.
        let key0 = CacheKey::new(&KeyParts { facts_json: "{\"i\":0}", ..parts() });
        let new_id = cache.put(&key0, &meta("gemm_0"), "{}", "{}").unwrap();
        let all = cache.history(None, None).unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!((all[0].id, all[0].meta.kernel.as_str()), (new_id, "gemm_0"));
    }

    #[test]
    fn garbage_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk.sqlite3");
        std::fs::write(&path, b"this is not an SQLite database, just some text that is long enough ".repeat(100)).unwrap();
        let err = Cache::open(&path).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, CacheError::NotACache { .. }), "{err:?}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("not a keet cache"), "{msg}");
    }

    #[test]
    fn truncated_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite3");
        {
            let cache = Cache::open(&path).unwrap();
            for i in 0..50 {
                let facts = format!("{i}");
                let key = CacheKey::new(&KeyParts { facts_json: &facts, ..parts() });
                cache.put(&key, &meta("k"), &"x".repeat(5000), "{}").unwrap();
            }
        }
        // Keep the header, lose the rest: SQLite notices when it reads the pages.
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(dir.path().join("c.sqlite3-wal"));
        let _ = std::fs::remove_file(dir.path().join("c.sqlite3-shm"));
        let mut broken = bytes[..100].to_vec();
        broken.extend(std::iter::repeat_n(0xA5u8, bytes.len().saturating_sub(100).max(8192)));
        std::fs::write(&path, broken).unwrap();
        match Cache::open(&path) {
            Err(e) => assert!(e.to_string().contains(&path.display().to_string()), "{e}"),
            Ok(c) => {
                // Opened (the header looked fine): reading must then fail with an error, not panic.
                let r = c.history(None, None).map(|_| ()).and_then(|_| c.integrity_check().map(|_| ()));
                if let Err(e) = r {
                    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
                }
            }
        }
    }

    #[test]
    fn foreign_sqlite_database_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
        }
        let err = Cache::open(&path).unwrap_err();
        assert!(matches!(err, CacheError::NotACache { .. }), "{err:?}");
        // And it was left untouched.
        let c = Connection::open(&path).unwrap();
        let n: i64 = c.query_row("SELECT count(*) FROM sqlite_master WHERE name = 'analyses'", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0);
        let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "delete");
    }

    #[test]
    fn newer_schema_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite3");
        drop(Cache::open(&path).unwrap());
        {
            let c = Connection::open(&path).unwrap();
            c.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        }
        let err = Cache::open(&path).unwrap_err();
        assert!(matches!(err, CacheError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1), "{err:?}");
        assert!(err.to_string().contains("newer keet"), "{err}");
    }

    #[test]
    fn directory_path_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let err = Cache::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains(&dir.path().display().to_string()), "{err}");
    }

    #[test]
    fn open_existing_does_not_create() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.sqlite3");
        assert!(Cache::open_existing(&path).unwrap().is_none());
        assert!(!path.exists());
    }

    fn filled(path: &Path, keys: std::ops::Range<usize>) -> Cache {
        let c = Cache::open(path).unwrap();
        for i in keys {
            let facts = format!("merge/{i}");
            c.put(&CacheKey::new(&KeyParts { facts_json: &facts, ..parts() }), &meta(&format!("k{i}")), &format!("{{\"i\":{i}}}"), "{}")
                .unwrap();
        }
        c
    }

    fn key_of(i: usize) -> CacheKey {
        let facts = format!("merge/{i}");
        CacheKey::new(&KeyParts { facts_json: &facts, ..parts() })
    }

    #[test]
    fn merge_folds_sources_skips_duplicates_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, dst) = (dir.path().join("a.sqlite3"), dir.path().join("b.sqlite3"), dir.path().join("dst.sqlite3"));
        drop(filled(&a, 0..5));
        drop(filled(&b, 3..8));
        drop(filled(&dst, 7..8));
        let mut seen = vec![];
        let stats = merge_into(&dst, &[a.clone(), b.clone()], |p, n| seen.push((p.to_path_buf(), n))).unwrap();
        assert_eq!(seen, vec![(a.clone(), 5), (b.clone(), 5)]);
        // a: 0..5 new; b: 3, 4 (from a) and 7 (dst had it) present, 5 and 6 new.
        assert_eq!(stats, MergeStats { added: 7, present: 3, total: 8 });
        let d = Cache::open(&dst).unwrap();
        for i in 0..8 {
            let e = d.get(&key_of(i)).unwrap().unwrap_or_else(|| panic!("entry {i} lost"));
            assert_eq!(e.findings_json, format!("{{\"i\":{i}}}"));
            assert_eq!(e.meta.kernel, format!("k{i}"));
        }
        assert_eq!(d.integrity_check().unwrap(), "ok");
        drop(d);
        // Sources untouched; merging again adds nothing.
        assert_eq!(Cache::open(&a).unwrap().len().unwrap(), 5);
        assert_eq!(merge_into(&dst, &[a.clone(), b.clone()], |_, _| {}).unwrap(), MergeStats { added: 0, present: 10, total: 8 });
        // A destination that does not exist yet is created.
        let fresh = dir.path().join("new/dir/fresh.sqlite3");
        assert_eq!(merge_into(&fresh, &[b], |_, _| {}).unwrap().total, 5);
        assert_eq!(Cache::open(&fresh).unwrap().len().unwrap(), 5);
        let leftovers: Vec<_> = std::fs::read_dir(fresh.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("fresh.sqlite3")]);
    }

    #[test]
    fn merge_refuses_bad_sources_and_leaves_the_destination_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        drop(filled(&p("good.sqlite3"), 0..3));
        drop(filled(&p("dst.sqlite3"), 10..12));
        // Newer schema.
        drop(filled(&p("newer.sqlite3"), 20..22));
        Connection::open(p("newer.sqlite3")).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        // Not SQLite at all; a foreign SQLite database; a corrupt keet cache (pages overwritten).
        std::fs::write(p("junk.sqlite3"), b"not a database ".repeat(400)).unwrap();
        Connection::open(p("foreign.sqlite3")).unwrap().execute_batch("CREATE TABLE t(x)").unwrap();
        {
            let c = filled(&p("corrupt.sqlite3"), 30..230);
            drop(c);
            let mut bytes = std::fs::read(p("corrupt.sqlite3")).unwrap();
            let n = bytes.len();
            for b in &mut bytes[4096..n - 4096] {
                *b = 0x5A;
            }
            std::fs::write(p("corrupt.sqlite3"), bytes).unwrap();
        }
        let before = Cache::open(p("dst.sqlite3")).unwrap().history(None, None).unwrap();
        let cases: [(&str, &str); 6] = [
            ("newer.sqlite3", "newer keet"),
            ("junk.sqlite3", "not a keet cache"),
            ("foreign.sqlite3", "not a keet cache"),
            ("corrupt.sqlite3", "corrupt.sqlite3"),
            ("missing.sqlite3", "missing.sqlite3"),
            ("dst.sqlite3", "destination"),
        ];
        for (bad, expect) in cases {
            // The good source first: nothing of it may land either.
            let err = merge_into(&p("dst.sqlite3"), &[p("good.sqlite3"), p(bad)], |_, _| {}).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(expect) && msg.contains(bad), "{bad}: {msg}");
            let after = Cache::open(p("dst.sqlite3")).unwrap().history(None, None).unwrap();
            assert_eq!(after, before, "{bad}: destination changed");
            // And a destination that did not exist is not created.
            if bad != "dst.sqlite3" {
                assert!(merge_into(&p("none.sqlite3"), &[p("good.sqlite3"), p(bad)], |_, _| {}).is_err());
                assert!(!p("none.sqlite3").exists(), "{bad}");
            }
        }
        assert!(!p("missing.sqlite3").exists(), "a missing source is not created");
    }

    #[test]
    fn cache_is_shareable_between_threads() {
        fn assert_sync<T: Send + Sync>() {}
        assert_sync::<Cache>();
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path().join("c.sqlite3")).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let cache = &cache;
                s.spawn(move || {
                    for i in 0..25 {
                        let facts = format!("{t}/{i}");
                        let key = CacheKey::new(&KeyParts { facts_json: &facts, ..parts() });
                        cache.put(&key, &meta(&facts), "{}", "{}").unwrap();
                    }
                });
            }
        });
        assert_eq!(cache.len().unwrap(), 100);
    }
}
