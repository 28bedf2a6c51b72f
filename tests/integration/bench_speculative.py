#!/usr/bin/python3
"""Speculative decoding through qwen3-bpfd's gRPC API: each chat request
(default: tools/bench/prompts/xdp-repair.json; --chats DIR: every *.json in
DIR, e.g. from tools/bench/prompts/make_copy_prompts.py) with SPECULATIVE_OFF
and SPECULATIVE_ON alternated over --rounds rounds; decode tokens/s as the
daemon reports it (Timings), draft/accepted tokens, and whether the tokens
agree; with several chats, a table and the median over them. Prints numbers;
asserts nothing about speed.

usage: bench_speculative.py --daemon BUILD/daemon/app/qwen3-bpfd --model DIR
                            [--precision q24|q8] [--tokens 150] [--rounds 3] [--temperature 0]
                            [--chat FILE | --chats DIR] [--driver auto|kernel|user]
"""

import argparse
import json
import os
import sys

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_harness as daemon_test  # noqa: E402  (stub generation)

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--precision", default="q24")
    ap.add_argument("--tokens", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--chat", default=os.path.join(HERE, "../../tools/bench/prompts/xdp-repair.json"))
    ap.add_argument("--chats", help="a directory of chat JSON files: run each, then the median over them")
    ap.add_argument("--driver", choices=("auto", "kernel", "user"), default="auto",
                    help="the daemon's driver key; speculative requests always decode in user space, so "
                         "'user' compares like with like, 'auto' against the default kernel-driven decode")
    ap.add_argument("--proto-dir", default=os.path.join(HERE, "../../proto"))
    args = ap.parse_args()

    with daemon_test.BenchDaemon(args.daemon, args.model, args.proto_dir, "qwen3-bpfd-spec-",
                                 precision=args.precision, http_socket="off", persist_sessions="false",
                                 driver=args.driver) as d:
        pb, stub = daemon_test.pb, d.stub
        chats = ([os.path.join(args.chats, f) for f in sorted(os.listdir(args.chats)) if f.endswith(".json")]
                 if args.chats else [args.chat])
        rows = [bench_chat(pb, stub, path, args) for path in chats]
        if len(rows) > 1:
            print("\n| prompt | acceptance | median speedup | same tokens |\n|---|---|---|---|")
            for r in rows:
                print(f"| {r['name']} | {r['acceptance']:.0f}% | {r['speedup']:.2f}x | {r['same']} |")
            med = sorted(r["speedup"] for r in rows)[len(rows) // 2]
            acc = sorted(r["acceptance"] for r in rows)[len(rows) // 2]
            print(f"median over {len(rows)} prompts: speedup {med:.2f}x, acceptance {acc:.0f}%")


def bench_chat(pb, stub, path, args):
    with open(path) as f:
        messages = [pb.ChatMessage(role=m["role"], content=m["content"]) for m in json.load(f)]

    def run(mode, seed):
        msgs = list(stub.Generate(pb.GenerateRequest(
            messages=messages, speculative=mode,
            sampling=pb.SamplingParams(temperature=args.temperature, top_k=20, top_p=0.9, seed=seed),
            stopping=pb.StoppingCriteria(max_new_tokens=args.tokens, ignore_eos=True)), timeout=600))
        return [m.token_id for m in msgs[:-1]], msgs[-1]

    name = os.path.splitext(os.path.basename(path))[0]
    figures = {pb.SPECULATIVE_OFF: [], pb.SPECULATIVE_ON: []}
    tokens = {}
    for r in range(args.rounds):
        for mode in (pb.SPECULATIVE_OFF, pb.SPECULATIVE_ON):
            ids, last = run(mode, 1000 + r)
            figures[mode].append(last)
            tokens.setdefault(mode, ids)
    acceptance = 0.0
    for mode, label in ((pb.SPECULATIVE_OFF, "off"), (pb.SPECULATIVE_ON, "on")):
        f = figures[mode]
        tps = [m.timings.decode_tokens_per_second for m in f]
        d = sum(m.usage.speculative_draft_tokens for m in f)
        a = sum(m.usage.speculative_accepted_tokens for m in f)
        if mode == pb.SPECULATIVE_ON:
            acceptance = 100.0 * a / d if d else 0.0
        print(f"{name}: speculative {label:3}: decode tok/s per round {', '.join(f'{x:.1f}' for x in tps)}; "
              f"drafted {d}, accepted {a} ({100.0 * a / d if d else 0:.1f}%)")
    ratios = sorted(on.timings.decode_tokens_per_second / off.timings.decode_tokens_per_second
                    for off, on in zip(figures[pb.SPECULATIVE_OFF], figures[pb.SPECULATIVE_ON]))
    same = tokens[pb.SPECULATIVE_OFF] == tokens[pb.SPECULATIVE_ON]
    print(f"{name}: median per-round speedup {ratios[len(ratios) // 2]:.2f}x; same tokens (first round): {same}")
    return {"name": name, "acceptance": acceptance, "speedup": ratios[len(ratios) // 2], "same": same}


if __name__ == "__main__":
    main()
