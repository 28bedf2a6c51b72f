"""Writes a trained model as a Hugging Face Qwen3 directory: config.json, BF16 model.safetensors
(tied embeddings, HF tensor names), generation_config.json and the tokenizer files."""
import json
import os
import shutil
import struct

import torch


def bf16_bytes(t):
    """Round-to-nearest-even float32 -> bfloat16, as torch's .to(torch.bfloat16) does."""
    return t.detach().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()


def full_embedding(model, vocab):
    """[vocab_size, hidden]: trained rows for used ids, the shared row for every other id."""
    w = model.embed.weight.detach()
    full = w[-1].expand(vocab.vocab_size, w.shape[1]).clone()
    full[torch.from_numpy(vocab.used)] = w[:-1]
    return full


def hf_tensors(model, vocab):
    out = {"model.embed_tokens.weight": full_embedding(model, vocab), "model.norm.weight": model.norm.weight}
    for i, layer in enumerate(model.layers):  # the module names are HF's own
        for name, p in layer.named_parameters():
            out[f"model.layers.{i}.{name}"] = p
    return out


def write_safetensors(path, tensors, metadata):
    """The safetensors layout: u64 header length, JSON header, then the raw little-endian data."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        b = bf16_bytes(tensors[name])
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # align the data to 8 bytes
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def hf_config(config):
    keys = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta", "vocab_size", "initializer_range"]
    c = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False,
         "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
         "max_window_layers": config["num_hidden_layers"], "rope_scaling": None, "sliding_window": None,
         "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
         "use_cache": True, "use_sliding_window": False}
    c.update({k: config[k] for k in keys})
    return dict(sorted(c.items()))


def export(model, vocab, config, out_dir, tokenizer_dir, metadata):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config(config), f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643, "do_sample": True,
           "temperature": 0.7, "top_k": 20, "top_p": 0.9, "repetition_penalty": 1.1,
           "transformers_version": "4.51.0"}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))
    write_safetensors(os.path.join(out_dir, "model.safetensors"), hf_tensors(model, vocab),
                      {k: str(v) for k, v in metadata.items()} | {"format": "pt"})


def bf16_round_(model):
    """Rounds the weights in place to what the BF16 export holds, so evaluation measures the shipped model."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
