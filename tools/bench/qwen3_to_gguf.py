#!/usr/bin/python3
"""Writes a qwen3-bpfd model directory (config.json, model.safetensors,
tokenizer.json) as a GGUF file that llama.cpp loads, for the side-by-side
benchmark (tools/bench/compare-llamacpp.sh).

llama.cpp's own converter needs transformers, which Debian 12 lacks; this one
needs numpy and the gguf-py package of the llama.cpp source tree given with
--llama-src (nothing is downloaded). The weights are written as they are
stored (BF16 matrices, F32 norms); llama-quantize makes Q8_0 / Q4_0 from it.

  qwen3_to_gguf.py MODEL_DIR OUT.gguf --llama-src PATH
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np


def read_safetensors(path):
    """Yields (name, dtype, shape, raw bytes) of every tensor (one file)."""
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        base = 8 + header_len
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            yield name, info["dtype"], info["shape"], f.read(end - begin)


# Hugging Face tensor names of one layer -> GGUF names (llama.cpp's qwen3 architecture).
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def gguf_name(hf_name):
    if hf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf_name]
    parts = hf_name.split(".", 3)  # model.layers.N.rest
    if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[3] in LAYER_NAMES:
        return f"blk.{int(parts[2])}.{LAYER_NAMES[parts[3]]}"
    raise SystemExit(f"qwen3_to_gguf: tensor {hf_name} has no GGUF name (not a dense Qwen3 checkpoint?)")


def add_tensors(writer, gguf, model_dir):
    for name, dtype, shape, raw in read_safetensors(model_dir / "model.safetensors"):
        out = gguf_name(name)
        if dtype == "BF16":
            words = np.frombuffer(raw, dtype=np.uint16).reshape(shape)
            if len(shape) == 1:  # norms in F32, as llama.cpp's converter writes them
                writer.add_tensor(out, (words.astype(np.uint32) << 16).view(np.float32))
            else:
                writer.add_tensor(out, words, raw_dtype=gguf.GGMLQuantizationType.BF16)
        elif dtype in ("F32", "F16"):
            writer.add_tensor(out, np.frombuffer(raw, dtype=np.float32 if dtype == "F32" else np.float16).reshape(shape))
        else:
            raise SystemExit(f"qwen3_to_gguf: tensor {name} has dtype {dtype}; BF16, F16 or F32 expected")


def add_tokenizer(writer, gguf, model_dir, vocab_size):
    tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(vocab_size):
        if i in added:
            tokens.append(added[i]["content"])
            types.append(gguf.TokenType.CONTROL if added[i].get("special") else gguf.TokenType.USER_DEFINED)
        elif i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
        else:  # the embedding's rows past the tokenizer's ids
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    ids = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
    writer.add_bos_token_id(ids.get("<|endoftext|>", 151643))
    writer.add_eos_token_id(ids.get("<|im_end|>", 151645))
    writer.add_pad_token_id(ids.get("<|endoftext|>", 151643))
    writer.add_add_bos_token(False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--llama-src", type=Path, required=True, help="a llama.cpp source tree (its gguf-py is used)")
    args = ap.parse_args()
    sys.path.insert(0, str(args.llama_src / "gguf-py"))
    try:
        import gguf
    except ImportError as e:
        raise SystemExit(f"qwen3_to_gguf: no gguf-py under {args.llama_src}/gguf-py: {e}")
    cfg = json.loads((args.model_dir / "config.json").read_text())
    if cfg.get("model_type") != "qwen3":
        raise SystemExit(f"qwen3_to_gguf: {args.model_dir}/config.json: model_type {cfg.get('model_type')!r}, want 'qwen3'")
    writer = gguf.GGUFWriter(str(args.out), "qwen3")
    writer.add_name(args.model_dir.name)
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(cfg["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    add_tokenizer(writer, gguf, args.model_dir, cfg["vocab_size"])
    add_tensors(writer, gguf, args.model_dir)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"qwen3_to_gguf: wrote {args.out}")


if __name__ == "__main__":
    main()
