#!/usr/bin/python3
"""Writes the copy-heavy chat prompts of the speculative-decoding benchmark
(issue 26 item 6) into DIR, one JSON chat per file, built from files in this
repository so that anyone can rebuild them: repairs that quote a whole
program, edits of a config file, and summaries that quote a document. Their
answers, where the model copies, repeat long runs of the prompt, which is
what prompt-lookup speculation drafts from.

usage: make_copy_prompts.py DIR
then:  tests/integration/bench_speculative.py --daemon ... --model ... --chats DIR
"""

import json
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
XDP_SYSTEM = json.load(open(os.path.join(ROOT, "tools/bench/prompts/xdp-repair.json")))[0]["content"]


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def repair(program, problem):
    return [{"role": "system", "content": XDP_SYSTEM},
            {"role": "user", "content": f"This program fails: {problem}\n\n```c\n{read(program)}```\n\n"
                                        "Repair it. Answer with one ```c code block holding the whole program."}]


def edit(path, change, lines=60):
    text = "".join(read(path).splitlines(keepends=True)[:lines])
    return [{"role": "user", "content": f"Here is {os.path.basename(path)}:\n\n```\n{text}```\n\n"
                                        f"{change} Print the whole file with the change and nothing else."}]


def quote(path, lines, ask):
    text = "\n".join(read(path).splitlines()[:lines])
    return [{"role": "user", "content": f"{text}\n\n{ask}"}]


PROMPTS = {
    "repair-no-bounds-check": repair("tests/verify/corpus/verifier_no_bounds_check.c",
                                     "the verifier rejects a packet access with no bounds check."),
    "repair-short-bounds-check": repair("tests/verify/corpus/verifier_bounds_check_too_short.c",
                                        "the bounds check covers fewer bytes than the access reads."),
    "repair-null-lookup": repair("tests/verify/corpus/verifier_null_hash_read.c",
                                 "the value of a map lookup is read without a NULL check."),
    "repair-loop-bound": repair("tests/verify/corpus/verifier_loop_bound_from_packet.c",
                                "the loop bound comes from the packet and the verifier cannot bound it."),
    "repair-port-filter": repair("tests/verify/corpus/port_filter.c",
                                 "it should also drop UDP port 53, not only the TCP port it drops."),
    "edit-conf-kv-bits": edit("conf/qwen3-bpfd.conf", "Set kv_bits to 16 and uncomment the precision line."),
    "edit-conf-precision": edit("conf/qwen3-bpfd.conf", "Change the precision to q24 and the KV cache to 16 bits."),
    "edit-c-rename": edit("tests/verify/corpus/ttl_decrement.c", "Rename the function to ttl_guard."),
    "quote-kv-cache-doc": quote("docs/kv-cache.md", 40,
                                "Quote the first paragraph above word for word, then summarise the rest in one sentence."),
    "quote-kernel-driver-doc": quote("docs/kernel-driver.md", 40,
                                     "Repeat the text above with every sentence that names a map kept as it is."),
}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, chat in PROMPTS.items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(chat, f, indent=1)
    print(f"{len(PROMPTS)} prompts in {out}")


if __name__ == "__main__":
    main()
