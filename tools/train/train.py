"""The training loop: deterministic for a seed, checkpointed, resumable, with progress.

Data order is a seeded permutation of fixed-length windows of the training stream, indexed by
step, so a resumed run sees exactly the batches the uninterrupted run would have seen. The
checkpoint holds the model, the optimizer and the negative sampler's generator state.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch

from model import Qwen3


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Vocab:
    """Compact ids: the sorted ids of the training stream, then one shared row for the rest."""

    def __init__(self, used, vocab_size):
        self.used = np.asarray(used, dtype=np.int64)
        self.vocab_size = vocab_size
        self.shared = len(self.used)
        self.n_unused = vocab_size - len(self.used)
        self.to_compact = np.full(vocab_size, self.shared, dtype=np.int64)
        self.to_compact[self.used] = np.arange(len(self.used))

    def compact(self, ids):
        return self.to_compact[ids]


class Windows:
    """Non-overlapping windows of seq+1 tokens, visited in a seeded order, epoch after epoch."""

    def __init__(self, stream, seq, seed, mask=None):
        self.stream, self.seq, self.seed, self.mask = stream, seq, seed, mask
        self.n = (len(stream) - 1) // seq
        self._epoch, self._perm = None, None

    def batch(self, step, batch_size):
        """[batch, seq+1] ids, and [batch, seq] target weights (the mask of targets 1..seq)."""
        rows, weights = [], []
        for i in range(step * batch_size, (step + 1) * batch_size):
            epoch, k = divmod(i, self.n)
            if epoch != self._epoch:
                self._epoch = epoch
                self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            s = self._perm[k] * self.seq
            rows.append(self.stream[s:s + self.seq + 1])
            weights.append(self.mask[s + 1:s + self.seq + 1] if self.mask is not None else np.ones(self.seq, np.float32))
        return torch.from_numpy(np.stack(rows)), torch.from_numpy(np.stack(weights))


def decay_start(steps, decay_fraction):
    return steps - int(round(decay_fraction * steps))


def lr_at(step, steps, peak, warmup, final_ratio, decay_fraction):
    """Warmup, then constant, then a linear decay over the last decay_fraction of the steps.
    Before the decay the schedule does not depend on the total, so a run can be lengthened or
    shortened while in that phase and stays identical to a fresh run of the new length."""
    if step < warmup:
        return peak * (step + 1) / warmup
    d0 = decay_start(steps, decay_fraction)
    if step < d0:
        return peak
    t = (step - d0 + 1) / max(1, steps - d0)
    return peak * (1 - (1 - final_ratio) * t)


@torch.no_grad()
def valid_loss(model, stream, seq, max_windows):
    """Mean next-token loss (nats) over the full vocabulary, on non-overlapping windows, and the
    mean probability the model gives the ids never seen in training (the shared row), from the
    same pass."""
    model.eval()
    n = min((len(stream) - 1) // seq, max_windows)
    total, count, unused_mass = 0.0, 0, 0.0
    for i in range(0, n, 8):
        rows = [stream[j * seq:j * seq + seq + 1] for j in range(i, min(n, i + 8))]
        x = torch.from_numpy(np.stack(rows))
        z = model.full_logits(model.hidden(x[:, :-1]))
        logp = torch.log_softmax(z, dim=-1)
        unused_mass += float(logp[..., -1].exp().sum())
        tgt = x[:, 1:]
        lp = logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
        lp = torch.where(tgt == model.embed.weight.shape[0] - 1, lp - model.log_unused, lp)
        total -= float(lp.sum())
        count += tgt.numel()
    model.train()
    return total / count, unused_mass / count


def _semantic(arguments):
    """The arguments that change what is computed (a resume must keep them): not the logging,
    evaluation and checkpoint cadences."""
    return {k: v for k, v in arguments.items()
            if k not in ("restart", "log_every", "out", "steps", "eval_every", "eval_windows", "checkpoint_every",
                         "reschedule")}


def save_checkpoint(path, state):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def read_safetensors(path):
    """{name: float32 tensor} of a BF16/F32 safetensors file (the layout export.py writes)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        raw = bytearray(data[h["data_offsets"][0]:h["data_offsets"][1]])
        dt = {"BF16": torch.bfloat16, "F32": torch.float32}[h["dtype"]]
        out[name] = torch.frombuffer(raw, dtype=dt).float().reshape(h["shape"])
    return out


def shared_row_of(full):
    """The row most ids share in an exported embedding: the trained shared row of unused ids."""
    _, inverse, counts = torch.unique(full, dim=0, return_inverse=True, return_counts=True)
    return full[int((inverse == int(counts.argmax())).nonzero()[0])]


def init_from_(model, vocab, model_dir):
    """Warm start from an exported model (same shape): every layer as it is; the embedding row of
    each id this corpus uses is that id's exported row (the exported shared row for ids the
    earlier corpus did not use), the shared row the exported one."""
    t = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    full = t.pop("model.embed_tokens.weight")
    with torch.no_grad():
        model.embed.weight[:-1] = full[torch.from_numpy(vocab.used)]
        model.embed.weight[-1] = shared_row_of(full)
        model.norm.weight.copy_(t.pop("model.norm.weight"))
        for i, layer in enumerate(model.layers):
            for name, p in layer.named_parameters():
                p.copy_(t.pop(f"model.layers.{i}.{name}"))
    if t:
        raise SystemExit(f"train: {model_dir}: unexpected tensors {sorted(t)[:5]}")


def train(args, config, train_ids, valid_ids, train_mask=None):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    vocab = Vocab(np.unique(train_ids), config["vocab_size"])
    train_c = vocab.compact(train_ids)
    valid_c = vocab.compact(valid_ids)
    model = Qwen3(config, len(vocab.used) + 1, vocab.n_unused)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, config["initializer_range"])
    resuming = os.path.exists(os.path.join(args.out, "checkpoint.pt")) and not args.restart
    if getattr(args, "init_from", None) and not resuming:
        init_from_(model, vocab, args.init_from)
        vl, _ = valid_loss(model, valid_c, args.seq, args.eval_windows)
        log(f"train: warm start from {args.init_from}: valid loss {vl:.3f}  ppl {math.exp(vl):.1f}  ({args.eval_windows} windows)")
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    sampler = torch.Generator().manual_seed(args.seed + 1)
    windows = Windows(train_c, args.seq, args.seed, train_mask)
    ckpt = os.path.join(args.out, "checkpoint.pt")
    start, history = 0, []
    if os.path.exists(ckpt) and not args.restart:
        state = torch.load(ckpt)
        old_steps = state["args"]["steps"]
        lengthened_in_time = state["step"] <= min(decay_start(old_steps, args.decay_fraction),
                                                  decay_start(args.steps, args.decay_fraction))
        # --reschedule: a run cut short after its decay began continues on the new length's
        # schedule (a step down in LR); the history records where, so the run stays explainable.
        rescheduled = old_steps != args.steps and not lengthened_in_time and getattr(args, "reschedule", False)
        if _semantic(state["args"]) != _semantic(vars(args)) or (old_steps != args.steps and not lengthened_in_time
                                                                  and not rescheduled):
            log("train: the checkpoint was made with other arguments; use --restart to start over")
            log(f"  checkpoint: {state['args']}\n  now:        {vars(args)}")
            raise SystemExit(2)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sampler.set_state(state["sampler"])
        start, history = state["step"], state["history"]
        if rescheduled:
            log(f"train: rescheduled at step {start}: {old_steps} -> {args.steps} steps")
            history.append({"step": start, "rescheduled_from_steps": old_steps, "to_steps": args.steps})
        log(f"train: resumed at step {start} of {args.steps}")

    tokens_per_step = args.batch * args.seq
    log(f"train: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters "
        f"({len(vocab.used)} used ids of {config['vocab_size']}), {len(train_ids)} training tokens, "
        f"{args.steps} steps of {tokens_per_step} tokens ({args.steps * tokens_per_step / len(train_ids):.2f} epochs)")
    t0, done0 = time.time(), start
    for step in range(start, args.steps):
        lr = lr_at(step, args.steps, args.lr, args.warmup, args.final_lr_ratio, args.decay_fraction)
        for g in opt.param_groups:
            g["lr"] = lr
        x, w = windows.batch(step, args.batch)
        h = model.hidden(x[:, :-1])
        full = step >= args.steps - args.full_softmax_steps
        if full:
            z = model.full_logits(h)
            ce = torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
        else:
            ce = model.sampled_loss(h, x[:, 1:], args.negatives, sampler)
        loss = (ce * w.reshape(-1)).sum() / w.sum().clamp(min=1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done = step + 1
        if done % args.log_every == 0 or done == args.steps:
            rate = (done - done0) * tokens_per_step / max(1e-9, time.time() - t0)
            eta = (args.steps - done) * tokens_per_step / max(rate, 1e-9)
            log(f"step {done}/{args.steps}  loss {float(loss):.3f}{' (full)' if full else ''}  lr {lr:.2e}  "
                f"{rate:.0f} tok/s  ETA {eta / 60:.1f} min")
        if done % args.eval_every == 0 or done == args.steps:
            vl, _ = valid_loss(model, valid_c, args.seq, args.eval_windows)
            history.append({"step": done, "train_loss": float(loss), "valid_loss": vl, "valid_ppl": math.exp(vl)})
            log(f"  valid loss {vl:.3f}  ppl {math.exp(vl):.1f}  ({args.eval_windows} windows)")
        if done % args.checkpoint_every == 0 or done == args.steps:
            save_checkpoint(ckpt, {"args": vars(args), "model": model.state_dict(), "opt": opt.state_dict(),
                                   "sampler": sampler.get_state(), "step": done, "history": history})
    with open(os.path.join(args.out, "history.json"), "w") as f:
        json.dump(history, f, indent=1)
    return model, vocab, history
