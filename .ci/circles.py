#!/usr/bin/env python3
"""Import circles between the files of a crate's src directory.

    python3 .ci/circles.py router/src plane/src ...

Each file is a module (`a/b.rs` is `a::b`; a directory's `mod.rs` is the
directory, `lib.rs` and `main.rs` the crate root). A file uses the modules
its `crate::...` and `super::...` paths name (in `use` declarations and
anywhere in its code; comments and `#[cfg(test)]` modules aside), each path
taken to the deepest module it names; a name that a module re-exports
(`pub use x::Name`, or any `use`) is followed to where it comes from. A
circle is a set of files that reach one another through these uses. Prints
nothing and exits 0 when there is none; else prints each circle (its files
and the uses inside it) and exits 1.
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
PATH = re.compile(r"\b(?:crate|super)(?:\s*::\s*(?:super|" + IDENT + r"|\{[^;]*?\}|\*))+")


def strip_comments(text):
    """The code of a file: comments and string literals blanked out, and
    everything from a `#[cfg(test)]` module on left out."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif text[i] == '"' or re.match(r'r#*"', text[i:i + 8]) and not re.match(r"\w", text[i - 1:i]):
            m = re.compile(r'r(#*)"').match(text, i)
            if m:
                end = text.find('"' + m.group(1), m.end())
                i = n if end < 0 else end + 1 + len(m.group(1))
            else:
                i += 1
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
                i += 1
            out.append('""')
        elif text[i] == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 12]) or text.startswith("'\\", i):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x..|\\.|[^\\'])'", text[i:])
            i += len(m.group(0)) if m else 1
            out.append("' '")
        else:
            out.append(text[i])
            i += 1
    code = "".join(out)
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+" + IDENT + r"\s*\{", code)
    return code[: m.start()] if m else code


def expand(tree):
    """`a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e` (lists of segments)."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [[s for s in tree.split("::") if s]]
    head = [s for s in tree[:brace].split("::") if s]
    inner = tree[brace + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for c in inner:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += c == "{"
        depth -= c == "}"
        cur += c
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            for rest in expand(p):
                out.append(head + rest)
    return out or [head]


def modules(src):
    """Module path (tuple) -> file, and the test-only files to leave out."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main") and (parts[-1] == "mod" or len(parts) == 1):
                parts = parts[:-1]
            mods.setdefault(tuple(parts), os.path.join(src, rel))
    tests = set()
    for m, path in mods.items():
        code = open(path, encoding="utf-8").read()
        for name in re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s*)?mod\s+(" + IDENT + r")\s*;", code):
            tests.add(m + (name,))
    return mods, tests


def absolute(here, segs):
    """A `crate::`/`super::` path, from module `here`, as absolute segments."""
    if segs[0] == "crate":
        return list(segs[1:])
    base = list(here)
    while segs and segs[0] == "super":
        base = base[:-1]
        segs = segs[1:]
    return base + list(segs)


def main(srcs):
    found = False
    for src in srcs:
        mods, tests = modules(src)
        codes = {m: strip_comments(open(p, encoding="utf-8").read()) for m, p in mods.items() if m not in tests}
        # What each module's `use` declarations bring in, by name.
        imports = {}
        for m, code in codes.items():
            names = {}
            for decl in re.findall(r"\buse\s+([^;]+);", code):
                for segs in expand(decl):
                    if not segs or segs[-1] in ("*", "self"):
                        continue
                    name, _, alias = segs[-1].partition("@")
                    segs = segs[:-1] + [name]
                    if segs[0] in ("crate", "super", "self"):
                        full = absolute(m, segs) if segs[0] != "self" else list(m) + segs[1:]
                    elif m == () or tuple(list(m) + [segs[0]]) in mods:
                        full = list(m) + segs
                    else:
                        continue
                    names[alias or name] = full
            imports[m] = names

        def resolve(full, seen=()):
            for k in range(len(full), -1, -1):
                mod = tuple(full[:k])
                if mod in codes:
                    rest = full[k:]
                    if rest and rest[0] in imports.get(mod, {}) and (mod, rest[0]) not in seen:
                        return resolve(imports[mod][rest[0]] + rest[1:], seen + ((mod, rest[0]),))
                    return mod
            return None

        edges = {m: {} for m in codes}
        for m, code in codes.items():
            for match in PATH.finditer(code):
                for segs in expand(match.group(0)):
                    segs = [s.partition("@")[0] for s in segs if s not in ("*", "self")]
                    target = resolve(absolute(m, segs))
                    if target is not None and target != m and target not in tests:
                        edges[m].setdefault(target, "::".join(segs))
        for scc in components(edges):
            if len(scc) < 2:
                continue
            found = True
            name = lambda m: os.path.relpath(mods[m])
            print(f"circle in {src}: " + ", ".join(sorted(name(m) for m in scc)))
            for m in sorted(scc):
                for t, via in sorted(edges[m].items()):
                    if t in scc:
                        print(f"  {name(m)} -> {name(t)} ({via})")
    return 1 if found else 0


def components(edges):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            out.append(scc)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
