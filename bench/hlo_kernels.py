#!/usr/bin/env python3
"""The kernels of XLA's optimized programs, by kind, from a dump folder
(XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text"): reads every
*after_optimizations.txt module in DIR, lists each with its kernel count, then prints the
largest one's (the train step, in a run that also compiles small programs) kernels:
  fusion:kLoop 37                         fusions by kind= (kCustom ones by their backend kind,
  fusion:kCustom(__triton_gemm) 2          e.g. fusion:kCustom(__triton_gemm))
  custom-call:__cublas$gemm 39            custom-calls by custom_call_target
  op:copy 1                               other top-level ops that launch work
  total kernels 123
  not kernels: parameter 40, get-tuple-element 39, ...   (no launch of their own)
Only the entry computation's top-level instructions count, with those of the computations its
`call`s run (XLA's command buffers), which are listed apart. --all prints every module.
Usage: bench/hlo_kernels.py DIR [--all]
"""
import argparse
import collections
import glob
import os
import re
import sys

# Top-level ops that launch nothing: they name, alias or reinterpret buffers.
NOT_KERNELS = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
               "opt-barrier", "add-dependency", "domain", "partition-id", "replica-id"}
HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*)?\{\s*$")
INSTR = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def opcode_of(rhs):
    """The opcode of an instruction's right-hand side: its shape (a tuple's in balanced
    parentheses) first, then `opcode(`."""
    i = 0
    if rhs.startswith("("):
        depth = 0
        for i, ch in enumerate(rhs):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        i += 1
    else:
        i = rhs.find(" ")
    m = re.match(r"\s*([\w\-]+)\(", rhs[i:])
    return m.group(1) if m else None


def computations(text):
    """{name: [(opcode, rhs)]} and the entry computation's name."""
    comps, entry, current = {}, None, None
    for line in text.splitlines():
        if current is None:
            m = HEADER.match(line)
            if m and not line.startswith("HloModule"):
                current = m.group(2)
                comps[current] = []
                if m.group(1):
                    entry = current
            continue
        if line.startswith("}"):
            current = None
            continue
        m = INSTR.match(line)
        if m:
            comps[current].append((opcode_of(m.group(2)), m.group(2)))
    return comps, entry


def kernels(text):
    """Counter of kernel kinds, Counter of non-kernel ops, command buffers (calls) seen."""
    comps, entry = computations(text)
    kinds, others, calls = collections.Counter(), collections.Counter(), 0

    def walk(name, depth):
        nonlocal calls
        for op, rhs in comps.get(name, []):
            if op == "fusion":
                m = re.search(r"\bkind=(\w+)", rhs)
                kind = m.group(1) if m else "?"
                if kind == "kCustom":
                    b = re.search(r'"kind"\s*:\s*"([^"]+)"', rhs)
                    if b:
                        kind += f"({b.group(1)})"
                kinds["fusion:" + kind] += 1
            elif op == "custom-call":
                m = re.search(r'custom_call_target="([^"]*)"', rhs)
                kinds["custom-call:" + (m.group(1) if m else "?")] += 1
            elif op == "call" and depth < 4:
                m = re.search(r"\bto_apply=%?([\w.\-]+)", rhs)
                if m and m.group(1) in comps:
                    calls += 1
                    walk(m.group(1), depth + 1)
                else:
                    kinds["op:call"] += 1
            elif op in NOT_KERNELS:
                others[op] += 1
            elif op:
                kinds["op:" + op] += 1

    if entry:
        walk(entry, 0)
    return kinds, others, calls


def report(path, kinds, others, calls):
    def order(k):  # fusions, custom-calls, other ops; most first
        return ("fusion:", "custom-call:", "op:").index(k[0].split(":")[0] + ":"), -k[1], k[0]

    name = re.search(r"^HloModule\s+([\w.\-]+)", open(path).read(), re.M)
    print(f"module {os.path.basename(path)} ({name.group(1) if name else '?'})")
    for k, v in sorted(kinds.items(), key=order):
        print(f"{k} {v}")
    print(f"total kernels {sum(kinds.values())}")
    print("not kernels: " + (", ".join(f"{k} {v}" for k, v in others.most_common()) or "none"))
    if calls:
        print(f"command buffers (calls): {calls}, their kernels counted above")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--all", action="store_true", help="every module, not only the largest")
    a = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(a.dir, "*after_optimizations.txt")))
    if not paths:
        print(f"no *after_optimizations.txt module in {a.dir}")
        return 1
    counted = []
    for p in paths:
        with open(p) as f:
            counted.append((p,) + kernels(f.read()))
    print("modules: " + "; ".join(f"{os.path.basename(c[0])} {sum(c[1].values())} kernels"
                                  for c in counted))
    chosen = counted if a.all else [max(counted, key=lambda c: sum(c[1].values()))]
    for c in chosen:
        report(*c)
    return 0


if __name__ == "__main__":
    sys.exit(main())
