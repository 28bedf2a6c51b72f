#!/usr/bin/env python3
"""Turns one bpfix case's oracle (its test.py) into a fixture file `qwen3-bpf verify --fixtures` reads.

bpfix's test.py files call `run_case(argv=..., expected_reject_substrings=[...],
functional_tests=[(name, packet_builder, expected_xdp_return), ...])` from the
suite's tools/bpf_case.py, which loads the program with bpftool and runs each
packet with `bpftool prog run`. This module stands in for bpf_case: it records
the functional tests instead of running them, builds each packet with the case's
own builder, and prints {"fixtures": [{"name", "packet_hex", "expected_action"}] (tests
that write maps before their run are left out),
"not_reproduced": [the oracle's other checks: pinned maps, ring buffers, register
states]}. Cases without packet tests print {"unsupported": "why"}.

Usage (run in a subprocess: the case's test.py is executed):
    bpfix_oracle.py CASE_DIR/test.py
"""
import json
import runpy
import sys
import types

ACTIONS = {0: "XDP_ABORTED", 1: "XDP_DROP", 2: "XDP_PASS", 3: "XDP_TX", 4: "XDP_REDIRECT"}


class Captured(Exception):
    pass


def main():
    captured = {}

    def run_case(**kwargs):
        captured.update(kwargs)
        raise Captured()

    fake = types.ModuleType("bpf_case")
    fake.run_case = run_case
    not_reproduced = []

    # Every other helper of bpf_case (pinned-map and ring-buffer checks, register-state
    # probes) is a check this oracle does not reproduce: recorded, never run.
    def other(name):
        if name.startswith("__"):
            raise AttributeError(name)
        not_reproduced.append(name)
        return lambda *a, **k: None

    fake.__getattr__ = other
    sys.modules["bpf_case"] = fake
    sys.argv = [sys.argv[1]]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except Captured:
        pass
    except SystemExit:
        pass
    tests = captured.get("functional_tests")
    if not tests:
        print(json.dumps({"unsupported": "no functional_tests (keys: %s)" % sorted(captured)}))
        return
    fixtures = []
    for t in tests:
        # (name, packet, action[, map updates before the run[, checks of maps after it]])
        if len(t) < 3 or not callable(t[1]) or t[2] not in ACTIONS:
            print(json.dumps({"unsupported": "a functional test is not (name, packet, XDP action, ...): %r" % (t,)}))
            return
        if len(t) > 3 and t[3]:
            not_reproduced.append("test %s: map updates before the run (test left out)" % t[0])
            continue
        if len(t) > 4 and t[4]:
            not_reproduced.append("test %s: %d map check(s) after the run" % (t[0], len(t[4])))
        fixtures.append({"name": str(t[0]), "packet_hex": bytes(t[1]()).hex(), "expected_action": ACTIONS[t[2]]})
    if not fixtures:
        print(json.dumps({"unsupported": "every packet test needs map contents first"}))
        return
    extra = sorted(set(not_reproduced) | {k for k in captured if k not in ("argv", "functional_tests",
                                                                          "expected_reject_substrings")})
    print(json.dumps({"fixtures": fixtures, "not_reproduced": extra}))


if __name__ == "__main__":
    main()
