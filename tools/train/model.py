"""Qwen3ForCausalLM, written out in PyTorch: what Hugging Face's implementation computes.

RMSNorm (weight * x / rms), per-head RMSNorm on q and k before rotate-half RoPE, grouped-query
attention with 1/sqrt(head_dim) scaling, SwiGLU MLP, tied input/output embeddings, no biases.

The one departure is bookkeeping, not arithmetic: the embedding holds only the ids the corpus
uses (`used` rows) plus one shared row for every other id of the 151,936. The exported
embedding copies that shared row to each unused id, so the exported model's full-vocabulary
softmax equals this model's softmax over used ids plus one class of weight log(n_unused).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rope_tables(seq_len, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    t = torch.arange(seq_len, dtype=torch.float64)
    freqs = torch.outer(t, inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.nh, self.nkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        H = c["hidden_size"]
        self.q_proj = nn.Linear(H, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, H, bias=False)
        self.q_norm = RMSNorm(self.hd, c["rms_norm_eps"])
        self.k_norm = RMSNorm(self.hd, c["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, self.nh, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd)) + mask
        y = F.softmax(att, dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, M = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(H, M, bias=False)
        self.up_proj = nn.Linear(H, M, bias=False)
        self.down_proj = nn.Linear(M, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen3(nn.Module):
    """config: a Qwen3 config.json dict. n_rows: used ids + 1 (the last row is the shared
    row of every unused id). n_unused: how many vocabulary ids share that row."""

    def __init__(self, config, n_rows, n_unused):
        super().__init__()
        self.c = config
        self.embed = nn.Embedding(n_rows, config["hidden_size"])
        self.layers = nn.ModuleList(Layer(config) for _ in range(config["num_hidden_layers"]))
        self.norm = RMSNorm(config["hidden_size"], config["rms_norm_eps"])
        self.log_unused = math.log(n_unused) if n_unused > 0 else float("-inf")
        self._rope = None

    def rope(self, T):
        if self._rope is None or self._rope[0].shape[0] < T:
            self._rope = rope_tables(max(T, 256), self.c["head_dim"], self.c["rope_theta"])
        return self._rope[0][:T], self._rope[1][:T]

    def hidden(self, ids):
        """Final-norm hidden states for compact ids [B, T]."""
        B, T = ids.shape
        cos, sin = self.rope(T)
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)

    def full_logits(self, h):
        """Logits over every compact row; the shared row carries log(n_unused)."""
        z = h @ self.embed.weight.t()
        z[..., -1] += self.log_unused
        return z

    def sampled_loss(self, h, targets, n_negatives, generator):
        """Per-target losses of a sampled softmax: the batch's targets, uniform random negatives and the shared row.
        Negatives that are not targets are weighted by 1/q (q = their inclusion probability), so
        the partition function is estimated without bias."""
        n_rows = self.embed.weight.shape[0]
        n_used = n_rows - 1
        tgt = torch.unique(targets)
        neg = torch.randint(0, n_used, (n_negatives,), generator=generator)
        neg = torch.unique(neg)
        is_tgt = torch.zeros(n_rows, dtype=torch.bool)
        is_tgt[tgt] = True
        neg = neg[~is_tgt[neg]]
        shared = torch.tensor([n_rows - 1])
        cand = torch.cat([tgt[tgt != n_rows - 1], neg, shared])
        q = 1.0 - (1.0 - 1.0 / n_used) ** n_negatives
        adjust = torch.zeros(cand.shape[0])
        n_t = int((tgt != n_rows - 1).sum())
        adjust[n_t:n_t + neg.shape[0]] = -math.log(q)
        adjust[-1] = self.log_unused
        z = h.reshape(-1, h.shape[-1]) @ self.embed.weight[cand].t() + adjust
        pos = torch.full((n_rows,), -1, dtype=torch.long)
        pos[cand] = torch.arange(cand.shape[0])
        return F.cross_entropy(z, pos[targets.reshape(-1)], reduction="none")
