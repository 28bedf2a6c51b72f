#!/usr/bin/python3
"""Throughput of qwen3-bpfd through its API: one stream, then N concurrent
streams (which the scheduler batches into shared engine steps). Prints numbers;
asserts nothing about speed.

usage: bench_daemon.py --daemon BUILD/daemon/app/qwen3-bpfd --model DIR
                       [--backend bpf|reference] [--clients 4] [--tokens 32]
"""

import argparse
import os
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_harness as daemon_test  # noqa: E402  (stub generation)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="bpf")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--proto-dir", default=os.path.join(os.path.dirname(__file__), "../../proto"))
    args = ap.parse_args()

    with daemon_test.BenchDaemon(args.daemon, args.model, args.proto_dir, "qwen3-bpfd-bench-",
                                 backend=args.backend) as d:
        pb, stub = daemon_test.pb, d.stub
        st = stub.GetStatus(pb.GetStatusRequest(), timeout=5)

        def run(prompt):
            msgs = list(stub.Generate(pb.GenerateRequest(
                prompt=prompt, stopping=pb.StoppingCriteria(max_new_tokens=args.tokens, ignore_eos=True)),
                timeout=600))
            return msgs[-1]

        run("warm up")
        t = time.time()
        one = run("A single stream of tokens")
        single_s = time.time() - t
        results = [None] * args.clients
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, run(f"client {i} says"))) for i in
                   range(args.clients)]
        t = time.time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        multi_s = time.time() - t
        total = sum(r.usage.completion_tokens for r in results)
        print(f"model {args.model}: {st.model.num_hidden_layers} layers, hidden {st.model.hidden_size}; "
              f"backend {st.backend.name} ({st.backend.weight_path}, {st.backend.precision}), "
              f"{st.backend.bpf_programs} programs, {st.backend.bpf_maps} maps; ready after {d.ready_s:.1f} s")
        print(f"1 stream:  {args.tokens} tokens in {single_s:.2f} s = {args.tokens / single_s:.1f} tok/s "
              f"(prefill {one.timings.prefill_ms:.1f} ms, decode {one.timings.decode_tokens_per_second:.1f} tok/s)")
        print(f"{args.clients} streams: {total} tokens in {multi_s:.2f} s = {total / multi_s:.1f} tok/s aggregate")


if __name__ == "__main__":
    main()
