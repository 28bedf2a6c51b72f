#!/usr/bin/python3
"""Held-out perplexity of an exported model (e.g. the previously shipped one) on a corpus's
validation split, computed exactly as make_model.py computes the trained model's: the full
151,936-id softmax of the BF16 weights, non-overlapping windows of --seq tokens.

    python3 tools/train/eval_model.py --model DIR --corpus WORK/corpus [--split valid]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402
from model import Qwen3  # noqa: E402


def load_exported(model_dir):
    """The exported model as a compact Qwen3: its used ids are those whose embedding row is not
    the shared row, so the full-vocabulary softmax is computed exactly and cheaply."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    full = train.read_safetensors(os.path.join(model_dir, "model.safetensors"))["model.embed_tokens.weight"]
    shared = train.shared_row_of(full)
    used = (full != shared).any(dim=1).nonzero().squeeze(1).numpy()
    vocab = train.Vocab(used, config["vocab_size"])
    model = Qwen3(config, len(vocab.used) + 1, vocab.n_unused)
    train.init_from_(model, vocab, model_dir)
    return model, vocab


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--corpus", required=True, help="a corpus folder of corpus.py (valid.npy)")
    p.add_argument("--split", default="valid")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--windows", type=int, default=10**9)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, vocab = load_exported(args.model)
    ids = np.load(os.path.join(args.corpus, args.split + ".npy")).astype(np.int64)
    loss, unused_mass = train.valid_loss(model, vocab.compact(ids), args.seq, args.windows)
    print(json.dumps({"model": args.model, "split": args.split, "tokens": int(len(ids)), "used_ids": int(len(vocab.used)),
                      "valid_loss": loss, "valid_ppl": math.exp(loss), "unused_id_mass": unused_mass}))


if __name__ == "__main__":
    main(sys.argv[1:])
