#!/usr/bin/python3
"""Latency of the UDP endpoint against the same request over gRPC (not a ctest).

  tests/kclient/bench_udp.py --daemon build/daemon/app/qwen3-bpfd --model DIR [--rounds 5] [--tokens 32]

Starts the daemon in a private network namespace with udp_endpoint = lo:7070,
then alternates, round by round, one greedy generation over UDP (generate
datagram, then polls answered by XDP) and the same one over gRPC (a stream),
UDP on a fresh session, gRPC on an ephemeral cache, so both compute the whole prompt. Prints datagram (or
call) to first token, and time per token after the first, best and median,
with the daemon's CPU time over the run.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import daemon_test as dt  # noqa: E402
import kclient_wire as w  # noqa: E402

PROMPT = [9707, 11, 279, 10001, 374, 264]


def udp_once(c, rid, session, n):
    t0 = time.perf_counter()
    c.send(w.generate(rid, session, PROMPT, max_tokens=n, text=False))
    stamps, nxt = [], 0
    while True:
        a = c.poll(rid, session, nxt)
        now = time.perf_counter()
        if a and a["status"] == 0:
            stamps += [now] * sum(1 for e in a["entries"] if not e["flags"])
            nxt += len(a["entries"])
            if a["finish"] and nxt >= a["produced"]:
                break
        if not a or not a["entries"]:
            time.sleep(0.0005)
    return stamps[0] - t0, (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1), len(stamps)


def grpc_once(stub, session, n):
    t0 = time.perf_counter()
    stamps = []
    for m in stub.Generate(dt.pb.GenerateRequest(token_ids=PROMPT,  # ephemeral: the whole prompt computed
                                                 sampling=dt.pb.SamplingParams(temperature=0),
                                                 stopping=dt.pb.StoppingCriteria(max_new_tokens=n)), timeout=600):
        if m.token_id >= 0:
            stamps.append(time.perf_counter())
    return stamps[0] - t0, (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1), len(stamps)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--proto", default=os.path.join(HERE, "..", "..", "proto"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    w.enter_private_netns()
    with dt.BenchDaemon(args.daemon, args.model, args.proto, "qwen3-udp-bench-", udp_endpoint="lo:7070",
                        udp_rate_limit="0", persist_sessions="false", socket_group="") as d:
        c = w.Client(7070)
        udp_once(c, 1, "warm-u", 4)
        grpc_once(d.stub, "warm-g", 4)
        res = {"udp": [], "grpc": []}
        cpu0, t0 = cpu_seconds(d.proc.pid), time.perf_counter()
        for r in range(args.rounds):
            order = ("udp", "grpc") if r % 2 == 0 else ("grpc", "udp")
            for kind in order:
                if kind == "udp":
                    res["udp"].append(udp_once(c, 100 + r, f"bu-{r}", args.tokens))
                else:
                    res["grpc"].append(grpc_once(d.stub, f"bg-{r}", args.tokens))
        wall, cpu = time.perf_counter() - t0, cpu_seconds(d.proc.pid) - cpu0
        for kind, rows in res.items():
            first = [x[0] * 1000 for x in rows]
            per = [x[1] * 1000 for x in rows]
            print(f"{kind:5s} first token ms: best {min(first):.1f} median {statistics.median(first):.1f}; "
                  f"per token ms: best {min(per):.2f} median {statistics.median(per):.2f} "
                  f"({rows[0][2]} tokens, {len(rows)} rounds)")
        print(f"daemon CPU {cpu:.1f} s over {wall:.1f} s wall")


if __name__ == "__main__":
    main()
