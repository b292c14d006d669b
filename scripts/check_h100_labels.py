#!/usr/bin/env python3
"""Checks fixtures/h100/labels.toml facts against the raw CSV pages of an H100 run, without Rust.

The GPU machine has Python but no Rust toolchain: run this there right after
scripts/profile-h100.sh to see which label facts hold before bringing the profiles back, and to
tune a threshold or a metric name. tests/h100_labels.rs makes the same checks with keet's own
readers (plus the rule layer) once the files are in fixtures/h100/.

Usage: python3 scripts/check_h100_labels.py [--dir DIR] [--labels FILE] [--metrics] [KERNEL ...]
  --dir DIR   folder with <kernel>.raw.csv (default: fixtures/h100)
  --metrics   also print a few headline metrics per kernel (for tuning thresholds)
Exit status: 0 when every fact of every profiled kernel holds, 1 otherwise, 2 on usage errors.
"""
import argparse
import csv
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HEADLINE = [
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed|dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__maximum_warps_per_active_cycle_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
    "launch__registers_per_thread",
]


def load_labels(path):
    """labels.toml as a list of dicts (tomllib where available, else the file's simple subset)."""
    text = open(path, encoding="utf-8").read()
    try:
        import tomllib  # Python 3.11+

        return tomllib.loads(text)["kernel"]
    except ImportError:
        pass
    kernels, cur, key, items = [], None, None, None
    for line in text.splitlines():
        s = line.strip()
        if items is not None:  # inside a multi-line array of strings
            if s.startswith("]"):
                cur[key], items = items, None
            elif s.startswith('"'):
                items.append(re.match(r'"((?:[^"\\]|\\.)*)"', s).group(1))
            continue
        if not s or s.startswith("#"):
            continue
        if s == "[[kernel]]":
            cur = {}
            kernels.append(cur)
            continue
        m = re.match(r'(\w+)\s*=\s*(.*)$', s)
        if m and cur is not None:
            key, val = m.group(1), m.group(2)
            if val.startswith("["):
                items = []
                for q in re.findall(r'"((?:[^"\\]|\\.)*)"', val):
                    items.append(q)
                if "]" in val:
                    cur[key], items = items, None
            elif val.startswith('"'):
                cur[key] = re.match(r'"((?:[^"\\]|\\.)*)"', val).group(1)
    return kernels


PREFIX = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
TIME = {"second": 1e9, "s": 1e9}  # to nanoseconds


def scale_part(unit):
    """(factor to keet's base unit, is_time) for one side of a unit like 'usecond' or 'Kbyte'."""
    for base in ("second", "byte", "hz", "cycle", "inst", "warp", "sector", "request", "thread", "block"):
        if unit == base or unit.lower() == base:
            return (TIME.get(base, 1.0), base == "second")
        if len(unit) == len(base) + 1 and unit[1:].lower() == base and unit[0] in PREFIX:
            return (PREFIX[unit[0]] * TIME.get(base, 1.0), base == "second")
    return (1.0, False)


def normalise(value, unit):
    """Scales a raw-page value to keet's base units (time in ns, bytes, Hz, plain counts)."""
    unit = unit.strip()
    if not unit or unit == "%":
        return value
    if "/" in unit:
        num, den = unit.split("/", 1)
        fn, _ = scale_part(num)
        fd, den_time = scale_part(den)
        # a rate keeps "per second": byte/usecond -> byte/second
        return value * fn / (fd / 1e9 if den_time else fd)
    return value * scale_part(unit)[0]


def parse_number(text):
    t = text.strip().strip('"')
    if t in ("", "n/a", "N/A"):
        return None
    for candidate in (t, t.replace(",", "")):
        try:
            v = float(candidate)
            return v if math.isfinite(v) else None
        except ValueError:
            continue
    return None


def read_raw(path):
    """Metric name -> normalised value, from a one-launch `ncu --page raw --csv` export."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = [r for r in csv.reader(f) if r]
    # skip anything before the header (application output, ==PROF== lines)
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None or len(rows) < start + 3:
        raise ValueError("no raw-page header/units/data rows")
    header, units, data = rows[start], rows[start + 1], rows[start + 2:]
    if len(data) != 1:
        print(f"  note: {path}: {len(data)} launches, using the first", file=sys.stderr)
    out = {}
    for name, unit, text in zip(header, units, data[0]):
        v = parse_number(text)
        if v is not None:
            out[name] = normalise(v, unit)
    return out


TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)|(?P<id>[A-Za-z_][A-Za-z0-9_.|]*)|(?P<op>>=|<=|==|!=|[-+*/%()<>]))")


def compile_fact(fact):
    """Translates a label fact into a Python expression over m(name, twin)."""
    pos, parts = 0, []
    while pos < len(fact):
        m = TOKEN.match(fact, pos)
        if not m or m.end() == pos:
            if fact[pos:].strip() == "":
                break
            raise ValueError(f"cannot parse at '{fact[pos:]}'")
        pos = m.end()
        if m.group("num"):
            parts.append(m.group("num"))
        elif m.group("id"):
            ident = m.group("id")
            twin = ident.startswith("twin.")
            names = (ident[5:] if twin else ident).split("|")
            parts.append(f"m({names!r}, {twin})")
        else:
            parts.append(m.group("op"))
    return " ".join(parts)


class Missing(Exception):
    pass


def evaluate(fact, own, twin):
    def m(names, is_twin):
        src = twin if is_twin else own
        if src is None:
            raise Missing("twin profile missing")
        for n in names:
            if n in src:
                return src[n]
        raise Missing(("twin." if is_twin else "") + "|".join(names) + " not in the profile")

    expr = compile_fact(fact)
    cmp = re.search(r" (>=|<=|==|!=|>|<) ", expr)
    lhs, op, rhs = expr[: cmp.start()], cmp.group(1), expr[cmp.end():]
    env = {"m": m, "__builtins__": {}}
    lv, rv = eval(lhs, env), eval(rhs, env)  # noqa: S307 (our own label file, restricted names)
    holds = {">": lv > rv, ">=": lv >= rv, "<": lv < rv, "<=": lv <= rv, "==": lv == rv, "!=": lv != rv}[op]
    return holds, lv, rv


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "fixtures", "h100"))
    ap.add_argument("--labels", default=os.path.join(ROOT, "fixtures", "h100", "labels.toml"))
    ap.add_argument("--metrics", action="store_true")
    ap.add_argument("kernels", nargs="*")
    args = ap.parse_args()

    labels = load_labels(args.labels)
    by_name = {k["name"]: k for k in labels}
    for k in args.kernels:
        if k not in by_name:
            print(f"unknown kernel {k}", file=sys.stderr)
            return 2
    profiles = {}
    for k in labels:
        path = os.path.join(args.dir, k["name"] + ".raw.csv")
        if os.path.exists(path):
            try:
                profiles[k["name"]] = read_raw(path)
            except (OSError, ValueError) as e:
                print(f"{path}: {e}", file=sys.stderr)

    failures, checked, missing = 0, 0, []
    for k in labels:
        name = k["name"]
        if args.kernels and name not in args.kernels:
            continue
        own = profiles.get(name)
        if own is None:
            missing.append(name)
            continue
        print(f"{name}  [{k['category']}, twin {k['twin']}]")
        if args.metrics:
            for h in HEADLINE:
                v = next((own[n] for n in h.split("|") if n in own), None)
                print(f"    {h.split('|')[0]:<72} {v if v is not None else '-'}")
        for fact in k["facts"]:
            checked += 1
            try:
                holds, lv, rv = evaluate(fact, own, profiles.get(k["twin"]))
                status = "ok  " if holds else "FAIL"
                failures += 0 if holds else 1
                print(f"  {status} {fact}   ({lv:.6g} vs {rv:.6g})")
            except Missing as e:
                failures += 1
                print(f"  MISS {fact}   ({e})")
            except ZeroDivisionError:
                failures += 1
                print(f"  FAIL {fact}   (division by zero)")
    if missing:
        print(f"no raw page for: {', '.join(missing)}")
    print(f"{checked - failures} passed, {failures} failed")
    if checked == 0:
        print(f"no profiles found in {args.dir}", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
