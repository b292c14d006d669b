#!/usr/bin/env python3
"""Dumps what NVIDIA's own reader (`ncu_report`, PyPI wheel `ncu-report`) finds in .ncu-rep files.

Used by tests/integration/ncu_report_oracle.rs as the oracle for keet's native reader. For each report, in
NVIDIA's launch order: the launch's function, mangled and demangled names, and every metric the
reader lists with its value kind and stored value (strings as text, integers exactly, floating
point as a float, NaN and infinities as the strings "nan", "inf", "-inf"), or "has_value": false for a metric listed without a value;
and the source files embedded for the launch (`ncu --import-source yes`, `action.source_files()`),
sorted by path, each as its path, the sha256 of its text encoded as UTF-8 and that length in bytes
("source_files_error" instead when the reader cannot give them); and the source line of every SASS
address that has per-instruction counters (`action.source_info(pc)`), as "source_lines": {"0x...":
[file, line]} for the addresses the reader maps to a line.

Exit status 3 when `ncu_report` cannot be imported (the caller decides whether that is a skip or a
failure), 1 on any other error. Usage: ncu_report_oracle.py REPORT.ncu-rep... > oracle.json
"""
import hashlib
import json
import math
import sys

try:
    import ncu_report
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(f"cannot import ncu_report: {e} (pip install ncu-report)", file=sys.stderr)
    sys.exit(3)

M = ncu_report.IMetric
KINDS = {
    M.ValueKind_STRING: "string",
    M.ValueKind_FLOAT: "float",
    M.ValueKind_DOUBLE: "double",
    M.ValueKind_UINT32: "uint32",
    M.ValueKind_UINT64: "uint64",
}
A = ncu_report.IAction


def metric(m):
    if not m.has_value():
        return {"has_value": False, "instances": m.num_instances()}
    kind = KINDS.get(m.kind(), f"kind {m.kind()}")
    if kind == "string":
        value = m.as_string()
    elif kind in ("uint32", "uint64"):
        value = m.as_uint64()
    else:
        value = m.as_double()
        if not math.isfinite(value):
            value = repr(value)  # "nan" / "inf": JSON has no such numbers
    return {"has_value": True, "kind": kind, "value": value}


def source_files(act):
    files = []
    for path, text in act.source_files().items():
        data = text.encode("utf-8", "surrogatepass")
        files.append({"path": path, "sha256": hashlib.sha256(data).hexdigest(), "length": len(data)})
    return sorted(files, key=lambda f: f["path"])


PER_PC = ("inst_executed", "smsp__pcsamp_sample_count", "thread_inst_executed")


def source_lines(act):
    pcs = set()
    for name in PER_PC:
        m = act.metric_by_name(name)
        if m is not None and m.num_instances() > 0 and m.has_correlation_ids():
            ids = m.correlation_ids()
            pcs.update(ids.as_uint64(i) for i in range(m.num_instances()))
    out = {}
    for pc in sorted(pcs):
        info = act.source_info(pc)
        if info is not None and info.file_name():
            out[hex(pc)] = [info.file_name(), info.line()]
    return out


def launch(r, act):
    out = {
        "range": r,
        "name": act.name(A.NameBase_FUNCTION),
        "mangled": act.name(A.NameBase_MANGLED),
        "demangled": act.name(A.NameBase_DEMANGLED),
        "metrics": {n: metric(act.metric_by_name(n)) for n in act.metric_names()},
    }
    try:
        out["source_files"] = source_files(act)
    except Exception as e:  # a text the binding cannot convert: reported, not fatal
        out["source_files_error"] = f"{type(e).__name__}: {e}"
    out["source_lines"] = source_lines(act)
    return out


def report(path):
    ctx = ncu_report.load_report(path)
    launches = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            launches.append(launch(r, rng.action_by_idx(a)))
    return {"path": path, "launches": launches}


def main():
    json.dump({"ncu_report_version": getattr(ncu_report, "__version__", None),
               "files": [report(p) for p in sys.argv[1:]]}, sys.stdout)


if __name__ == "__main__":
    main()
