#!/usr/bin/python3
"""Throughput of qwen3-bpfd through its API: one stream, then N concurrent
streams (which the scheduler batches into shared engine steps). Prints numbers;
asserts nothing about speed.

usage: bench_daemon.py --daemon BUILD/daemon/service/qwen3-bpfd --model DIR
                       [--backend bpf|reference] [--clients 4] [--tokens 32]
"""

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_test  # noqa: E402  (stub generation)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="bpf")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--proto-dir", default=os.path.join(os.path.dirname(__file__), "../../proto"))
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="qwen3-bpfd-bench-")
    daemon_test.PROTO_DIR = os.path.abspath(args.proto_dir)
    daemon_test.generate_stubs(os.path.join(tmp, "stubs"))
    pb, rpc = daemon_test.pb, daemon_test.pb_grpc
    sock = os.path.join(tmp, "s.sock")
    conf = os.path.join(tmp, "c.conf")
    with open(conf, "w") as f:
        f.write(f"model_dir = {os.path.abspath(args.model)}\nbackend = {args.backend}\nsocket_path = {sock}\n"
                f"log_level = warn\nstate_dir = {tmp}\n")
    t0 = time.time()
    proc = daemon_test.start_daemon(conf, os.path.join(tmp, "daemon.log"), sock, 600, daemon=args.daemon)
    load_s = time.time() - t0
    try:
        stub = rpc.Qwen3BpfStub(grpc.insecure_channel("unix:" + sock))
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
              f"{st.backend.bpf_programs} programs, {st.backend.bpf_maps} maps; ready after {load_s:.1f} s")
        print(f"1 stream:  {args.tokens} tokens in {single_s:.2f} s = {args.tokens / single_s:.1f} tok/s "
              f"(prefill {one.timings.prefill_ms:.1f} ms, decode {one.timings.decode_tokens_per_second:.1f} tok/s)")
        print(f"{args.clients} streams: {total} tokens in {multi_s:.2f} s = {total / multi_s:.1f} tok/s aggregate")
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
