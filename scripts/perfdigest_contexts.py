#!/usr/bin/env python3
"""Writes PerfDigest-MCP's digest of each `keet eval` question's kernel as a peer context.

Usage: perfdigest_contexts.py QUESTIONS.jsonl OUT.jsonl

QUESTIONS.jsonl is `keet eval ... --no-llm --questions-out QUESTIONS.jsonl`. For each question it
calls PerfDigest's own MCP tool functions in-process: `get_metrics` on the question's kernel (the
launch with the same name, grid and block), or `summarize_report` for a question about the whole
profile, and writes one {"id": ..., "context": ...} line, the tool's JSON as an agent would receive
it. A report PerfDigest cannot read gives its error as the context (what an agent would see).
Then: `keet eval ... --context perfdigest=OUT.jsonl`.
"""

import json
import re
import sys
from pathlib import Path

from perfdigest.server import app, tools

app._register_backends()  # what the MCP server does at start-up (registers every reader)


def report_format(path: str) -> str:
    return "ncu-rep" if path.endswith(".ncu-rep") else "ncu-csv"


def shape(label: str):
    """("name", blocks, threads per block) from keet's label "name grid (x,y,z) block (x,y,z)"."""
    m = re.match(r"^(.*) grid \(([^)]*)\) block \(([^)]*)\)$", label)
    if not m:
        return label, None, None
    product = lambda s: None if "?" in s else eval("*".join(s.split(",")))  # noqa: S307 - digits only
    return m.group(1), product(m.group(2)), product(m.group(3))


def find_unit(path: str, fmt: str, label: str):
    """The PerfDigest unit index of keet's kernel: same name (or prefix, for a cut name), same grid."""
    name, blocks, threads = shape(label)
    name = name[:-3] if name.endswith("...") else name
    units = [u for u in tools.list_kernels(path, fmt) if u["name"] == name or u["name"].startswith(name)]
    for u in units:
        m = tools.get_metrics(path, fmt, f"#{u['index']}")["metrics"]
        if m.get("grid_size") == blocks and m.get("block_size") == threads:
            return u["index"]
    return units[0]["index"] if units else None


def context(q: dict, cache: dict) -> str:
    path, label = q["file"], q["kernel"]
    key = (path, label)
    if key not in cache:
        fmt = report_format(path)
        try:
            if not label:
                digest = tools.summarize_report(path, fmt, top_n=5)
            else:
                index = find_unit(path, fmt, label)
                digest = tools.get_metrics(path, fmt, f"#{index}") if index is not None else {"error": f"no unit named {label!r}"}
        except Exception as e:  # the peer's own failure is its answer
            digest = {"error": f"{type(e).__name__}: {e}"}
        cache[key] = json.dumps(digest, indent=1)
    return cache[key]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    questions = [json.loads(l) for l in Path(sys.argv[1]).read_text().splitlines() if l.strip()]
    cache: dict = {}
    with open(sys.argv[2], "w") as out:
        for q in questions:
            out.write(json.dumps({"id": q["id"], "context": context(q, cache)}) + "\n")
    errors = sum(1 for c in cache.values() if c.lstrip("{ \n").startswith('"error"'))
    print(f"wrote {len(questions)} contexts ({len(cache)} distinct, {errors} PerfDigest errors) to {sys.argv[2]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
