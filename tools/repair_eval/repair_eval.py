#!/usr/bin/env python3
"""Measures the repair engine (`qwen3-bpf verify --fix`) on public repair benchmarks.

The data is kept outside the repository and is never downloaded by this script; it
takes the path of a copy (docs/xdp-verify.md, "Repair on public data", says where
it comes from):

    DATA/bpfix/<case>/{buggy.bpf.c, fixed.bpf.c, test.py, source.txt}
        eunomia-bpf/bpfix, bpfix-bench/cases: only the XDP cases (SEC("xdp") in the
        buggy program). The case's oracle (test.py) is turned into fixtures by
        bpfix_oracle.py (its packet tests; its other checks are listed as not
        reproduced). A case counts as repaired when the engine's program passes
        compile, verify and those fixtures.
    DATA/guardian/<category>/<task>/{faulty.c, tests.json, solution.c?}
        BPF-Guardian eBPF-Bench v0.1, data/benchmark/repair/<category>/<level>/<task>
        (category: compilation_error, verifier_rejection, behavioral_logic_bug).
        tests.json is given to `verify --fixtures` unchanged. Repaired: the engine's
        program passes compile, verify and every test.

Every program goes through a running daemon:
    qwen3-bpf --socket SOCK verify PROG.c --fixtures F.json --fix --json

Usage:
    repair_eval.py DATA --socket SOCK [--client PATH] [--source bpfix|guardian]
                   [--only REGEX] [--limit N] [--json OUT]

Prints one line per case and a table per source and category: cases, failing as
labelled (the program fails before the fix), repaired by the engine, the edit kinds
used, and why the rest were not (the engine's note). Python 3 standard library only.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CLIENT = os.path.join(HERE, "..", "..", "build", "client", "qwen3-bpf")


def bpfix_cases(root):
    base = os.path.join(root, "bpfix")
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        d = os.path.join(base, name)
        prog = os.path.join(d, "buggy.bpf.c")
        if not os.path.exists(prog) or 'SEC("xdp' not in open(prog, errors="replace").read():
            continue
        yield {"source": "bpfix", "case": name, "category": "verifier_rejection", "program": prog,
               "oracle": os.path.join(d, "test.py")}


def guardian_cases(root):
    base = os.path.join(root, "guardian")
    if not os.path.isdir(base):
        return
    for dirpath, _, files in sorted(os.walk(base)):
        if "faulty.c" not in files or "tests.json" not in files:
            continue
        rel = os.path.relpath(dirpath, base).split(os.sep)
        yield {"source": "guardian", "case": rel[-1], "category": rel[0],
               "program": os.path.join(dirpath, "faulty.c"), "fixtures": os.path.join(dirpath, "tests.json")}


def bpfix_fixtures(case, tmp):
    p = subprocess.run([sys.executable, os.path.join(HERE, "bpfix_oracle.py"), case["oracle"]],
                       capture_output=True, text=True, timeout=30)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return None, "oracle not readable: " + (p.stderr.strip().splitlines() or ["?"])[-1][:120]
    if "unsupported" in doc:
        return None, "oracle has no packet tests: " + doc["unsupported"][:120]
    path = os.path.join(tmp, case["case"] + ".json")
    with open(path, "w") as f:
        json.dump(doc["fixtures"], f)
    case["not_reproduced"] = doc["not_reproduced"]
    return path, ""


def run_fix(client, socket, program, fixtures, timeout):
    cmd = [client, "--socket", socket, "verify", program, "--fix", "--json"]
    if fixtures:
        cmd[5:5] = ["--fixtures", fixtures]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "client timed out"
    try:
        return json.loads(p.stdout), ""
    except ValueError:
        return None, (p.stderr.strip() or p.stdout.strip())[:200]


def judge(case, doc):
    r = doc.get("result", {})
    rep = doc.get("repair", {})
    before = r.get("decision_name") or r.get("decision", "?")
    stage = r.get("stage_name", "")
    cls = r.get("verifier_class_name", "")
    out = {"before": before, "stage": stage, "class": cls if stage == "verify" else "",
           "fixed": bool(rep.get("fixed")), "kinds": [s.get("kind") for s in rep.get("steps", [])],
           "candidates": rep.get("candidates_tried", 0), "note": rep.get("note", ""),
           "ms": rep.get("elapsed_ms", 0), "message": r.get("verifier_message", "") or r.get("summary", "")}
    if before == "pass":
        out["note"] = "passes before any fix (the label does not hold here)"
    return out


def table(rows):
    by = collections.OrderedDict()
    for r in rows:
        by.setdefault((r["source"], r["category"]), []).append(r)
    lines = ["| source | category | cases | failing | repaired | of failing | edit kinds |",
             "|---|---|---|---|---|---|---|"]
    for (src, cat), rs in by.items():
        failing = [r for r in rs if r.get("before") == "fail"]
        fixed = [r for r in failing if r.get("fixed")]
        kinds = collections.Counter(k for r in fixed for k in r["kinds"])
        pct = "%.0f%%" % (100.0 * len(fixed) / len(failing)) if failing else "-"
        lines.append("| %s | %s | %d | %d | %d | %s | %s |" % (src, cat, len(rs), len(failing), len(fixed), pct,
                                                             ", ".join("%s %d" % kv for kv in kinds.most_common())))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--client", default=DEFAULT_CLIENT)
    ap.add_argument("--source", choices=["bpfix", "guardian"])
    ap.add_argument("--only", help="regex on the case name")
    ap.add_argument("--limit", type=int, default=0, help="at most N cases per source")
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--json", help="write every case's outcome here")
    a = ap.parse_args()
    if not os.path.isdir(a.data):
        sys.exit("no data at %s (see the module docstring for its layout; nothing is downloaded)" % a.data)
    cases = []
    for gen in (bpfix_cases, guardian_cases):
        got = [c for c in gen(a.data) if (not a.source or c["source"] == a.source)
               and (not a.only or re.search(a.only, c["case"]))]
        cases += got[:a.limit] if a.limit else got
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            fixtures, why = (bpfix_fixtures(c, tmp) if c["source"] == "bpfix" else (c["fixtures"], ""))
            row = {"source": c["source"], "case": c["case"], "category": c["category"]}
            if why:
                row.update({"before": "skipped", "note": why})
            else:
                doc, err = run_fix(a.client, a.socket, c["program"], fixtures, a.timeout)
                row.update(judge(c, doc) if doc else {"before": "error", "note": err})
                if c.get("not_reproduced"):
                    row["oracle_not_reproduced"] = c["not_reproduced"]
            rows.append(row)
            print("%-9s %-55s %-8s %-22s %s" % (row["source"], row["case"][:55], row.get("before"),
                                               (row.get("stage", "") + "/" + row.get("class", "")).strip("/"),
                                               "FIXED " + ",".join(row["kinds"]) if row.get("fixed")
                                               else row.get("note", "")[:90]), flush=True)
    print()
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
