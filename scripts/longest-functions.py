#!/usr/bin/env python3
"""Prints the longest Rust functions, longest first: lines (from the `fn` line to its closing brace),
file:line and name.

    python3 scripts/longest-functions.py [-n 20] [PATH ...]     # default PATH: src

Test functions count too (a `#[cfg(test)]` module's functions are listed like any other). Braces
inside strings, raw strings, char literals and comments are skipped; a `fn` without a body (a trait
method's declaration) is not a function here.
"""
import argparse
import os
import re

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def code_mask(text):
    """`text` with every character inside a comment, string or char literal replaced by a space."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif m := re.compile(r'b?r(#*)"').match(text, i):
            if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i += 1
                continue
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            if text.startswith("\\", i + 1):
                j = text.find("'", i + 2)
                blank(i, j + 1)
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                blank(i, i + 3)
                i += 3
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


def functions(path):
    text = open(path, encoding="utf-8").read()
    code = code_mask(text)
    line_starts = [0] + [m.end() for m in re.finditer("\n", code)]

    def line_of(pos):
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    for m in FN.finditer(code):
        # The body opens at the first `{` outside the signature's brackets; a `;` first: no body.
        depth, j = 0, m.end()
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            if depth == 0 and ch in "{;":
                break
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        braces, k = 0, j
        while k < len(code):
            if code[k] == "{":
                braces += 1
            elif code[k] == "}":
                braces -= 1
                if braces == 0:
                    break
            k += 1
        first, last = line_of(m.start()), line_of(k)
        yield last - first + 1, f"{path}:{first}", m.group(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20, help="how many to print (default 20)")
    ap.add_argument("paths", nargs="*", default=["src"])
    a = ap.parse_args()
    found = []
    for root in a.paths:
        files = [root] if root.endswith(".rs") else [
            os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")]
        for f in sorted(files):
            found.extend(functions(f))
    found.sort(key=lambda t: (-t[0], t[1]))
    over = sum(1 for t in found if t[0] > 80)
    for lines, at, name in found[: a.n]:
        print(f"{lines:5}  {at}  {name}")
    print(f"{len(found)} functions, {over} over 80 lines")


if __name__ == "__main__":
    main()
