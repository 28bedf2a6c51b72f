#!/usr/bin/env python3
"""Measure the XDP verify service on a public set of buggy/fixed program pairs.

Layout of the set (kept outside the repository; the project does not carry it):

    SET/<source>/<case>/buggy.c      the program with the bug
    SET/<source>/<case>/fixed.c      the same program, repaired
    SET/<source>/<case>/tests.json   optional fixtures (any format `qwen3-bpf verify
                                     --fixtures` reads: bare array, {fixtures, maps},
                                     BPF-Guardian tests.json), used for both programs
    SET/<source>/<case>/source.txt   provenance (repo, path, commit); an optional line
                                     `expected_buggy_stage: compile|verify|behaviour`
                                     states where the benchmark says the bug shows

Each program goes through a running daemon, unchanged:
    qwen3-bpf --socket SOCK verify PROG.c [--fixtures tests.json] --json
A pair is classified correctly when the buggy program's decision is `fail` and the
fixed program's decision is `pass`. The table also says whether the buggy program
failed at the stage the benchmark names (normally `verify`), and for every pair that
is not classified correctly, why, grouped into causes (policy refusal, missing header,
call not allowed, fixture problem, verifier disagreement, ...).

With --kernel-check INCLUDE_TREE (root), every buggy program the service passed is also
compiled outside the service (clang-19 -O2 -g -target bpf against the service's own
header tree, STATE_DIR/verify/include) and loaded with `bpftool prog load ... type xdp`.
When the kernel's own loader accepts it too, the benchmark's label does not hold on this
kernel and compiler, whatever the service does; a second total leaves those pairs out.

Usage:
    measure.py SET --socket /tmp/xdpset.sock [--client PATH] [--json] [--source NAME]
                   [--case SUBSTR] [--jobs N] [--kernel-check STATE_DIR/verify/include]

Python 3 standard library only. Exit status 0 when every pair is correct, 1 otherwise.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

DEFAULT_CLIENT = "/work/main/build/client/qwen3-bpf"


def run_verify(client, socket, prog, fixtures, timeout):
    cmd = [client, "--socket", socket, "verify", prog]
    if fixtures:
        cmd += ["--fixtures", fixtures]
    cmd.append("--json")
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"decision": "error", "stage": "client", "summary": "client timed out",
                "raw": None, "seconds": timeout}
    secs = time.monotonic() - t0
    doc = None
    for stream in (p.stdout, p.stderr):
        s = stream.strip()
        if not s:
            continue
        try:
            doc = json.loads(s)
            break
        except ValueError:
            continue
    if doc is None or "result" not in doc:
        msg = (p.stderr.strip() or p.stdout.strip() or "no output")[:300]
        if isinstance(doc, dict) and doc.get("error"):
            msg = str(doc.get("error"))[:300]
        return {"decision": "error", "stage": "client", "summary": msg, "raw": doc,
                "seconds": secs}
    r = doc["result"]
    return {
        "decision": r.get("decision_name") or r.get("decision", "?"),
        "stage": r.get("stage_name") or r.get("first_failed_stage", "?"),
        "vclass": r.get("verifier_class_name") or r.get("verifier_class", ""),
        "error_id": r.get("error_id", ""),
        "error_class": r.get("error_class", ""),
        "summary": r.get("summary", ""),
        "verifier_message": r.get("verifier_message", ""),
        "verifier_line": r.get("verifier_line", 0),
        "verifier_source_line": r.get("verifier_source_line", ""),
        "compiler_diagnostics": r.get("compiler_diagnostics", []),
        "fixtures": r.get("fixtures", []),
        "fixtures_not_run": r.get("fixtures_not_run", 0),
        "log_tail": (r.get("verifier_log_excerpt") or "")[-600:],
        "seconds": round(secs, 2),
    }


def first_diag(res):
    for d in res.get("compiler_diagnostics") or []:
        text = d.get("text") or d.get("message") or ""
        if text:
            line = d.get("line", "")
            return "line %s: %s" % (line, text) if line else text
    return ""


def failing_fixtures(res):
    out = []
    for f in res.get("fixtures") or []:
        if f.get("passed") is False or f.get("pass") is False:
            note = f.get("note") or ""
            if note.startswith("expected "):
                note = ""          # the note only restates expected/got
            out.append("%s expected %s got %s%s" % (
                f.get("name", "?"), f.get("expected_action", "?"), f.get("got_action", "?"),
                (" (" + note + ")") if note else ""))
    return out


def cause_of_failure(res):
    """(group, detail) for a program that should have passed and did not."""
    st, dec = res.get("stage", ""), res.get("decision", "")
    summ = res.get("summary", "")
    eid = res.get("error_id", "")
    if st == "client":
        return "client/daemon error", summ
    if st == "infrastructure":
        return "infrastructure error", summ
    if st == "policy":
        d = first_diag(res) or summ
        if eid == "BPFV-POL-INCLUDE" or "include" in d.lower():
            return "policy refusal: include", d
        return "policy refusal of a construct", d
    if st == "compile":
        d = first_diag(res) or summ
        if "file not found" in d or eid == "BPFV-CC-HEADER":
            return "missing header in the sandbox", d
        if "redefinition of" in d:
            return "compile error: the program redefines a type the uapi headers define", d
        return "compile error in the sandbox", d
    if st == "verify":
        msg = res.get("verifier_message") or summ
        if eid.startswith("BPFV-SEC-"):
            return "call/map not allowed by the service (allowlist)", "%s: %s" % (eid, summ)
        if eid == "BPFV-VER-HELPER-UNAVAILABLE":
            return "helper not offered to XDP by the kernel", msg
        return "verifier rejects it on this kernel", "%s [%s] line %s: %s" % (
            eid, res.get("vclass", ""), res.get("verifier_line", ""), msg)
    if st == "behaviour":
        if dec == "error":
            return "fixture problem (fixtures unusable / not run)", summ
        ff = failing_fixtures(res)
        if ff and all("expected XDP_REDIRECT got XDP_ABORTED" in x for x in ff):
            return ("fixture problem: XDP_REDIRECT through a map the fixture file does not fill",
                    "; ".join(ff))
        return "behaviour: fixture expectation not met", "; ".join(ff) or summ
    return "other", "%s/%s: %s" % (dec, st, summ)


def kernel_accepts(prog, include_tree, tag):
    """True / False when the kernel's own loader accepts / refuses the program compiled
    outside the service; None when it does not compile there (no verdict)."""
    with tempfile.TemporaryDirectory() as d:
        obj = os.path.join(d, "prog.o")
        cc = subprocess.run(["clang-19", "-O2", "-g", "-target", "bpf", "-nostdinc", "-isystem",
                             include_tree, "-c", prog, "-o", obj], capture_output=True, text=True)
        if cc.returncode != 0:
            return None
        pin = "/sys/fs/bpf/qwen3-xdpset-%d-%s" % (os.getpid(), tag)
        ld = subprocess.run(["bpftool", "prog", "load", obj, pin, "type", "xdp"],
                            capture_output=True, text=True)
        if os.path.exists(pin):
            os.unlink(pin)
        return ld.returncode == 0


def judge(case):
    b, f = case["buggy"], case["fixed"]
    reasons = []
    if b["decision"] != "fail":
        if b["decision"] == "pass":
            reasons.append(("buggy program accepted by this kernel's verifier "
                            "(the benchmark's label disagrees)",
                            "buggy passed: " + b.get("summary", "")))
        else:
            g, d = cause_of_failure(b)
            reasons.append(("buggy program could not be judged: " + g, d))
    if f["decision"] != "pass":
        g, d = cause_of_failure(f)
        reasons.append((g, "fixed: " + d))
    correct = not reasons
    exp = case.get("expected_buggy_stage")
    stage_ok = None
    if b["decision"] == "fail" and exp:
        stage_ok = (b["stage"] == exp)
    return correct, stage_ok, reasons


def read_source_txt(path):
    meta = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                m = re.match(r"\s*([A-Za-z_]+)\s*:\s*(.*?)\s*$", line)
                if m:
                    meta.setdefault(m.group(1), m.group(2))
    except OSError:
        pass
    return meta


def discover(root, only_source=None, only_case=None):
    cases = []
    for src in sorted(os.listdir(root)):
        sdir = os.path.join(root, src)
        if not os.path.isdir(sdir) or (only_source and src != only_source):
            continue
        for c in sorted(os.listdir(sdir)):
            cdir = os.path.join(sdir, c)
            if only_case and only_case not in c:
                continue
            buggy, fixed = os.path.join(cdir, "buggy.c"), os.path.join(cdir, "fixed.c")
            if not (os.path.isfile(buggy) and os.path.isfile(fixed)):
                continue
            tests = os.path.join(cdir, "tests.json")
            meta = read_source_txt(os.path.join(cdir, "source.txt"))
            cases.append({"source": src, "case": c, "dir": cdir, "buggy_c": buggy,
                          "fixed_c": fixed,
                          "tests": tests if os.path.isfile(tests) else None,
                          "expected_buggy_stage": meta.get("expected_buggy_stage"),
                          "category": meta.get("category", "")})
    return cases


def short(res):
    s = "%s/%s" % (res["decision"], res["stage"])
    if res["decision"] == "fail" and res["stage"] == "verify":
        s += "/" + (res.get("vclass") or "?")
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("set_dir")
    ap.add_argument("--socket", default=os.environ.get("QWEN3_BPF_SOCKET",
                                                       "/run/qwen3-bpfd/qwen3-bpfd.sock"))
    ap.add_argument("--client", default=DEFAULT_CLIENT if os.path.exists(DEFAULT_CLIENT)
                    else "qwen3-bpf")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--source", help="only this source folder")
    ap.add_argument("--case", help="only cases whose name contains this")
    ap.add_argument("--jobs", type=int, default=1, help="programs in flight (daemon runs 2)")
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--kernel-check", metavar="INCLUDE_TREE",
                    help="load the buggy programs the service passed with bpftool too (root)")
    a = ap.parse_args()

    cases = discover(a.set_dir, a.source, a.case)
    if not cases:
        print("no cases under %s" % a.set_dir, file=sys.stderr)
        return 2

    jobs = []
    for c in cases:
        jobs.append((c, "buggy", c["buggy_c"]))
        jobs.append((c, "fixed", c["fixed_c"]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = {ex.submit(run_verify, a.client, a.socket, prog, c["tests"], a.timeout):
                (c, which) for c, which, prog in jobs}
        for fu in concurrent.futures.as_completed(futs):
            c, which = futs[fu]
            c[which] = fu.result()

    by_source, groups = {}, {}
    for c in cases:
        c["correct"], c["stage_as_labelled"], c["reasons"] = judge(c)
        s = by_source.setdefault(c["source"], {"pairs": 0, "correct": 0, "stage_labelled": 0,
                                               "stage_agrees": 0})
        s["pairs"] += 1
        s["correct"] += c["correct"]
        if c["stage_as_labelled"] is not None:
            s["stage_labelled"] += 1
            s["stage_agrees"] += c["stage_as_labelled"]
        c["reasons"] = [(g, " / ".join(d.splitlines())) for g, d in c["reasons"]]
        for g, d in c["reasons"]:
            groups.setdefault(g, []).append("%s/%s: %s" % (c["source"], c["case"], d))
    total = {"pairs": len(cases), "correct": sum(c["correct"] for c in cases)}
    if a.kernel_check:
        for i, c in enumerate(cases):
            c["kernel_accepts_buggy"] = None
            if c["buggy"]["decision"] == "pass":
                c["kernel_accepts_buggy"] = kernel_accepts(c["buggy_c"], a.kernel_check, str(i))
        held = [c for c in cases if c["kernel_accepts_buggy"] is not True]
        total["label_holds_pairs"] = len(held)
        total["label_holds_correct"] = sum(c["correct"] for c in held)
        total["kernel_accepts_buggy"] = ["%s/%s" % (c["source"], c["case"]) for c in cases
                                         if c["kernel_accepts_buggy"] is True]

    if a.json:
        out = {"set_dir": a.set_dir, "totals": total, "by_source": by_source,
               "misclassification_groups": groups, "cases": []}
        for c in cases:
            out["cases"].append({k: c[k] for k in ("source", "case", "category",
                                                   "expected_buggy_stage", "correct",
                                                   "stage_as_labelled", "buggy", "fixed")}
                                | {"kernel_accepts_buggy": c.get("kernel_accepts_buggy")}
                                | {"reasons": [{"group": g, "detail": d}
                                               for g, d in c["reasons"]],
                                   "tests": bool(c["tests"])})
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0 if total["correct"] == total["pairs"] else 1

    w = max(len("%s/%s" % (c["source"], c["case"])) for c in cases)
    print("%-*s  %-32s  %-22s  %-3s  %s" % (w, "case", "buggy (decision/stage/class)",
                                            "fixed (decision/stage)", "ok", "why"))
    for c in cases:
        why = "; ".join(d for _, d in c["reasons"])
        tag = "yes" if c["correct"] else "NO"
        if c["correct"] and c["stage_as_labelled"] is False:
            why = "buggy failed at %s, benchmark labels %s" % (
                c["buggy"]["stage"], c["expected_buggy_stage"])
        print("%-*s  %-32s  %-22s  %-3s  %s" % (w, "%s/%s" % (c["source"], c["case"]),
                                                short(c["buggy"]), short(c["fixed"]), tag,
                                                why[:400]))
    print()
    print("Totals: %d of %d pairs classified correctly (%.1f%%)" % (
        total["correct"], total["pairs"], 100.0 * total["correct"] / total["pairs"]))
    if "label_holds_pairs" in total:
        n, k = total["label_holds_pairs"], total["label_holds_correct"]
        print("Pairs whose label holds on this kernel (the kernel's own loader refuses the buggy "
              "program, or the service did): %d of %d classified correctly (%.1f%%); left out, "
              "buggy accepted by bpftool prog load too: %s" % (
                  k, n, 100.0 * k / max(1, n), ", ".join(total["kernel_accepts_buggy"]) or "none"))
    for s, v in sorted(by_source.items()):
        line = "  %-10s %d / %d (%.1f%%)" % (s, v["correct"], v["pairs"],
                                              100.0 * v["correct"] / v["pairs"])
        if v["stage_labelled"]:
            line += "; buggy failed at the labelled stage: %d / %d" % (
                v["stage_agrees"], v["stage_labelled"])
        print(line)
    if groups:
        print()
        print("Misclassifications by cause:")
        for g, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print("  %s (%d)" % (g, len(items)))
            for it in items:
                print("    - " + it[:500])
    return 0 if total["correct"] == total["pairs"] else 1


if __name__ == "__main__":
    sys.exit(main())
