"""The training corpus: kernel documentation, conversations built from it, and BPF C programs,
from Debian's linux-source-6.1.

Documents are read straight out of the package's tarball (no unpacked tree needed), split 95/5
by a hash of their path (stable across runs and machines), and tokenized by the project's own
tokenizer (`qwen3-bpf tokenize --model DIR --jsonl`), so the ids the model learns are exactly
the ids the daemon will feed it.
"""
import hashlib
import json
import os
import re
import subprocess
import tarfile

import numpy as np

import conversations

DEFAULT_TARBALL = "/usr/src/linux-source-6.1.tar.xz"
EOS_ID = 151643  # <|endoftext|>: separates documents, as in Qwen3 pre-training
IM_START, IM_END, THINK_END = 151644, 151645, 151668  # <|im_start|> <|im_end|> </think>
ASSISTANT, DOUBLE_NEWLINE = 77091, 271  # the tokens "assistant" and "\n\n"
VALID_PERCENT = 5

# Mirrors xdp_system_prompt() in daemon/verify/generate.cpp, so xdp-gen's prompts look like the
# chat turns the model saw around BPF C code.
XDP_SYSTEM_PROMPT = (
    "You write eBPF XDP programs for the Linux kernel in C. Reply with exactly one C code block "
    "(```c ... ```) containing a complete XDP program and nothing else that matters:\n"
    "- one function in SEC(\"xdp\") taking struct xdp_md *ctx and returning XDP_ABORTED, XDP_DROP, XDP_PASS, "
    "XDP_TX or XDP_REDIRECT;\n"
    "- char LICENSE[] SEC(\"license\") = \"GPL\";\n"
    "- include only <linux/*.h> kernel uapi headers, <bpf/bpf_helpers.h>, <bpf/bpf_endian.h> or <vmlinux.h>; "
    "no other includes, no inline asm, no #pragma except unroll, no token pasting (##);\n"
    "- before every packet access compare the pointer plus the access size against ctx->data_end, "
    "check map lookups for NULL, initialise every variable, and bound every loop.\n"
    "The program is compiled with clang -O2 -g -target bpf, loaded through the kernel verifier and run on test "
    "packets with BPF_PROG_TEST_RUN.")


def _is_doc(name):
    return (name.startswith("Documentation/") and name.endswith(".rst")
            and not name.startswith("Documentation/translations/"))  # English only


def _is_bpf_prog(name):
    if name.startswith("samples/bpf/"):
        base = name[len("samples/bpf/"):]
        return "/" not in base and (base.endswith("_kern.c") or base.endswith(".bpf.c"))
    return name.startswith("tools/testing/selftests/bpf/progs/") and name.endswith(".c")


_SPDX = re.compile(r"SPDX-License-Identifier:\s*(.+)")
_GPL2_COMPATIBLE = ("GPL-2.0", "LGPL-2.1", "BSD-2-Clause", "BSD-3-Clause", "MIT")


def license_of(text):
    """The SPDX expression in a file's first lines; the kernel's COPYING makes GPL-2.0 the default."""
    m = _SPDX.search("\n".join(text.splitlines()[:5]))
    return m.group(1).strip().rstrip("*/ ").strip() if m else "GPL-2.0 (kernel default, no SPDX line)"


def gpl2_compatible(spdx):
    """Kept when the file may be used under GPL-2.0 (e.g. GFDL-only media docs are left out), so the
    weights can be offered under GPL-2.0 as the rest of the project is."""
    return any(lic in spdx for lic in _GPL2_COMPATIBLE)


def read_sources(tarball=DEFAULT_TARBALL):
    """Returns [(path, kind, text)] in path order; kind is 'doc' or 'bpf'. Files whose license
    offers no GPL-2.0-compatible choice are left out."""
    if not os.path.exists(tarball):
        raise SystemExit(f"corpus: {tarball} not found: apt-get install linux-source-6.1")
    out = []
    with tarfile.open(tarball, "r:xz") as tar:
        for m in tar:
            if not m.isfile():
                continue
            name = m.name.split("/", 1)[1] if "/" in m.name else m.name
            kind = "doc" if _is_doc(name) else "bpf" if _is_bpf_prog(name) else None
            if kind is None:
                continue
            text = tar.extractfile(m).read().decode("utf-8", errors="replace")
            if text.strip() and gpl2_compatible(license_of(text)):
                out.append((name, kind, text))
    out.sort()
    return out


def is_validation(path):
    h = int(hashlib.sha256(path.encode()).hexdigest()[:8], 16)
    return h % 100 < VALID_PERCENT


_COMMENT = re.compile(r"/\*(.*?)\*/|//([^\n]*)", re.S)
_BOILERPLATE = ("License", "license", "Copyright", "SPDX", "(c)", "Foundation", "free software")


def _task_of(path, code):
    """A one-line task for a BPF program: its first comment that is not license boilerplate,
    else its name."""
    head = "\n".join(code.splitlines()[:60])
    for m in _COMMENT.finditer(head):
        text = " ".join(l.strip(" *\t/") for l in (m.group(1) if m.group(1) is not None else m.group(2) or "").splitlines())
        text = " ".join(text.split())
        if len(text.split()) >= 3 and not any(w in text for w in _BOILERPLATE):
            return text[:300]
    name = os.path.basename(path)
    return "the BPF program " + re.sub(r"(_kern)?(\.bpf)?\.c$", "", name).replace("_", " ")


def render(path, kind, text):
    """The training texts of one source file. A document is plain text, and its sections also
    become conversations (conversations.py); a BPF program becomes a chat turn whose answer is
    the program in a ```c fence, with xdp-gen's system prompt and task framing only for XDP
    programs. Returns [(kind, text)], kind 'doc', 'conversation' or 'bpf'."""
    if kind == "doc":
        return [("doc", text)] + [("conversation", c) for c in conversations.render_conversations(path, text)]
    code = text.rstrip() + "\n"
    xdp = 'SEC("xdp' in text
    system = XDP_SYSTEM_PROMPT if xdp else "You write eBPF programs for the Linux kernel in C."
    task = "Task: " + _task_of(path, text) + "\n"
    if xdp:  # task_message() of daemon/verify/generate.cpp, without test packets
        task += "\nNo test packets are given; the program must compile and pass the verifier.\n"
    return [("bpf", "<|im_start|>system\n" + system + "<|im_end|>\n"
             "<|im_start|>user\n" + task + "\nAnswer with one ```c code block.<|im_end|>\n"
             "<|im_start|>assistant\n<think>\n\n</think>\n\n```c\n" + code + "```<|im_end|>\n")]


def tokenize(texts, command):
    """Token ids of each text, by the project's tokenizer (special tokens recognised). command:
    argv of `qwen3-bpf tokenize --model DIR --jsonl` or of tokenize.js."""
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    proc = subprocess.run(command, input=lines.encode(), stdout=subprocess.PIPE, check=True)
    out = []
    for line in proc.stdout.decode().splitlines():
        obj = json.loads(line)
        if "error" in obj:
            raise SystemExit("corpus: tokenizer: " + obj["error"])
        out.append(obj["ids"])
    if len(out) != len(texts):
        raise SystemExit(f"corpus: tokenizer answered {len(out)} lines for {len(texts)} documents")
    return out


def chat_mask(ids):
    """1 for the tokens a chat text trains on (each assistant answer and its <|im_end|>), 0 for
    the rest: the system prompt, the user's question and the template's framing are context
    only, so the model never learns to write them (a plain completion cannot drift into
    xdp-gen's system prompt or task line)."""
    mask = np.zeros(len(ids), dtype=np.uint8)
    i = 0
    while i < len(ids):
        if ids[i] == IM_START and i + 1 < len(ids) and ids[i + 1] == ASSISTANT:
            j = i + 2
            while j < len(ids) and ids[j] not in (THINK_END, IM_END):
                j += 1
            if j < len(ids) and ids[j] == THINK_END:
                j += 1
                if j < len(ids) and ids[j] == DOUBLE_NEWLINE:
                    j += 1
            k = j
            while k < len(ids) and ids[k] != IM_END:
                k += 1
            mask[j:k + 1] = 1
            i = k + 1
        else:
            i += 1
    return mask


def build(out_dir, tarball, tokenize_command):
    """Writes, per split, the token streams (uint32 ids, EOS after every text) and manifest.json:
    train.npy with train_mask.npy (1 = a trained target), every kind grouped (documents, then
    conversations, then programs); valid.npy: the held-out plain documents only (the perplexity
    split); valid_chat.npy with valid_chat_mask.npy: the held-out conversations and programs.
    A conversation goes to the split of the document it comes from."""
    os.makedirs(out_dir, exist_ok=True)
    sources = read_sources(tarball)
    items = []  # (split, kind, path, text, license)
    for path, kind, text in sources:
        split = "valid" if is_validation(path) else "train"
        for k, t in render(path, kind, text):
            if split == "valid" and k != "doc":
                split_k = "valid_chat"
            else:
                split_k = split
            items.append((split_k, k, path, t, license_of(text)))
    order = {"doc": 0, "conversation": 1, "bpf": 2}
    items.sort(key=lambda it: (order[it[1]], it[2]))
    ids = tokenize([it[3] for it in items], tokenize_command)
    manifest = {"tarball": tarball, "documents": {"train": [], "valid": [], "valid_chat": []}, "tokens": {},
                "trained_tokens": {}}
    streams = {s: ([], []) for s in manifest["documents"]}
    for (split, kind, path, _, lic), doc_ids in zip(items, ids):
        s, m = streams[split]
        s.extend(doc_ids)
        s.append(EOS_ID)
        m.extend(chat_mask(doc_ids).tolist() if kind != "doc" else [1] * len(doc_ids))
        m.append(1 if kind == "doc" else 0)
        manifest["documents"][split].append({"path": path, "kind": kind, "tokens": len(doc_ids) + 1, "license": lic})
    for split, (s, m) in streams.items():
        arr = np.asarray(s, dtype=np.uint32)
        np.save(os.path.join(out_dir, split + ".npy"), arr)
        if split != "valid":
            np.save(os.path.join(out_dir, split + "_mask.npy"), np.asarray(m, dtype=np.uint8))
        manifest["tokens"][split] = int(arr.size)
        manifest["trained_tokens"][split] = int(sum(m))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def load(out_dir):
    """(train ids, train mask, validation ids of the plain documents)."""
    return (np.load(os.path.join(out_dir, "train.npy")).astype(np.int64),
            np.load(os.path.join(out_dir, "train_mask.npy")).astype(np.float32),
            np.load(os.path.join(out_dir, "valid.npy")).astype(np.int64))
