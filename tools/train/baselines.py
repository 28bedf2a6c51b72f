"""Count-based baselines measured on the same split as the model: the yardstick that shows the
model learned more than token frequencies. Both cover the full 151,936-id vocabulary."""
import math

import numpy as np


def unigram_ppl(train, valid, vocab_size, alpha=1.0):
    """Add-alpha unigram."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64)
    p = (counts + alpha) / (counts.sum() + alpha * vocab_size)
    return math.exp(-np.log(p[valid]).mean())


def bigram_ppl(train, valid, vocab_size):
    """Interpolated absolute-discounting bigram (Kneser-Ney style backoff to the add-one unigram),
    its discount chosen on the validation split itself, so the baseline is as strong as it gets."""
    uni = np.bincount(train, minlength=vocab_size).astype(np.float64)
    p_uni = (uni + 1.0) / (uni.sum() + vocab_size)
    pairs = train[:-1] * vocab_size + train[1:]
    keys, pair_counts = np.unique(pairs, return_counts=True)
    prev = keys // vocab_size
    ctx_total = np.bincount(prev, weights=pair_counts, minlength=vocab_size)
    ctx_types = np.bincount(prev, minlength=vocab_size).astype(np.float64)
    vpairs = valid[:-1] * vocab_size + valid[1:]
    idx = np.searchsorted(keys, vpairs)
    idx = np.minimum(idx, len(keys) - 1)
    c = np.where(keys[idx] == vpairs, pair_counts[idx], 0).astype(np.float64)
    vp = valid[:-1]
    n_ctx, t_ctx = ctx_total[vp], ctx_types[vp]
    best = None
    for d in (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
        seen = n_ctx > 0
        p = np.where(seen, (np.maximum(c - d, 0) + d * t_ctx * p_uni[valid[1:]]) / np.maximum(n_ctx, 1),
                     p_uni[valid[1:]])
        ppl = math.exp(-np.log(p).mean())
        if best is None or ppl < best[0]:
            best = (ppl, d)
    return best
