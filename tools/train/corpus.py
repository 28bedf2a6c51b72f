"""The training corpus: kernel documentation and BPF C programs from Debian's linux-source-6.1.

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

DEFAULT_TARBALL = "/usr/src/linux-source-6.1.tar.xz"
EOS_ID = 151643  # <|endoftext|>: separates documents, as in Qwen3 pre-training
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
    """The training text of one document. BPF programs become chat turns with a ```c fence
    (the form the Qwen3 chat template renders with thinking off)."""
    if kind == "doc":
        return text
    code = text.rstrip() + "\n"
    system = XDP_SYSTEM_PROMPT if 'SEC("xdp' in text else "You write eBPF programs for the Linux kernel in C."
    return ("<|im_start|>system\n" + system + "<|im_end|>\n"
            "<|im_start|>user\nTask: " + _task_of(path, text) + "\n\nAnswer with one ```c code block.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n```c\n" + code + "```<|im_end|>\n")


def tokenize(texts, tokenizer_dir, cli="qwen3-bpf"):
    """Token ids of each text, by the project's tokenizer (special tokens recognised)."""
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    proc = subprocess.run([cli, "tokenize", "--model", tokenizer_dir, "--jsonl"], input=lines.encode(),
                          stdout=subprocess.PIPE, check=True)
    out = []
    for line in proc.stdout.decode().splitlines():
        obj = json.loads(line)
        if "error" in obj:
            raise SystemExit("corpus: tokenizer: " + obj["error"])
        out.append(obj["ids"])
    if len(out) != len(texts):
        raise SystemExit(f"corpus: tokenizer answered {len(out)} lines for {len(texts)} documents")
    return out


def build(out_dir, tokenizer_dir, tarball=DEFAULT_TARBALL, cli="qwen3-bpf"):
    """Writes train.npy / valid.npy (uint32 ids, EOS after every document) and manifest.json."""
    os.makedirs(out_dir, exist_ok=True)
    docs = read_sources(tarball)
    texts = [render(p, k, t) for p, k, t in docs]
    ids = tokenize(texts, tokenizer_dir, cli)
    manifest = {"tarball": tarball, "documents": {"train": [], "valid": []}, "tokens": {}}
    streams = {"train": [], "valid": []}
    for (path, kind, text), doc_ids in zip(docs, ids):
        split = "valid" if is_validation(path) else "train"
        streams[split].extend(doc_ids)
        streams[split].append(EOS_ID)
        manifest["documents"][split].append({"path": path, "kind": kind, "tokens": len(doc_ids) + 1,
                                             "license": license_of(text)})
    for split, s in streams.items():
        arr = np.asarray(s, dtype=np.uint32)
        np.save(os.path.join(out_dir, split + ".npy"), arr)
        manifest["tokens"][split] = int(arr.size)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def load(out_dir):
    return (np.load(os.path.join(out_dir, "train.npy")).astype(np.int64),
            np.load(os.path.join(out_dir, "valid.npy")).astype(np.int64))
