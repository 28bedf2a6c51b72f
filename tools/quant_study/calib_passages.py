"""Calibration passages for qwen3-bpf-quant-study on the trained model: held-out kernel
documentation the model never trained on, from documents other than the ones
tests/engine/trained_heldout.json evaluates on (so calibration and evaluation are disjoint).

    /usr/bin/python3 tools/quant_study/calib_passages.py --corpus WORK/corpus \
        --exclude tests/engine/trained_heldout.json --out tools/quant_study/trained_calib.json

WORK/corpus is the folder tools/train/corpus.py writes (manifest.json, valid.npy).
"""
import argparse
import json
import os

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", required=True)
    p.add_argument("--exclude", required=True, help="a held-out JSON whose sources are left out")
    p.add_argument("--out", required=True)
    p.add_argument("--passages", type=int, default=16)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--first", type=int, default=0, help="start at this qualifying document (another sample)")
    a = p.parse_args()
    manifest = json.load(open(os.path.join(a.corpus, "manifest.json")))
    ids = np.load(os.path.join(a.corpus, "valid.npy"))
    excluded = {q["source"] for q in json.load(open(a.exclude))["prompts"]}
    docs, start = [], 0
    for d in manifest["documents"]["valid"]:
        if d["kind"] == "doc" and d["tokens"] > 2 * a.length and d["path"] not in excluded:
            docs.append((d["path"], start + d["tokens"] // 2))  # from the middle of the document
        start += d["tokens"]
    if len(docs) < a.passages:
        raise SystemExit(f"calib_passages: only {len(docs)} documents qualify, {a.passages} asked")
    step = len(docs) // a.passages
    out = [{"source": path, "ids": [int(i) for i in ids[s:s + a.length]]} for path, s in docs[a.first::step][:a.passages]]
    with open(a.out, "w") as f:
        json.dump({"model": "qwen3-kerneldoc", "purpose": "calibration", "prompts": out}, f)
    print(f"calib_passages: {len(out)} passages of {a.length} tokens from {len(docs)} documents -> {a.out}")


if __name__ == "__main__":
    main()
