#!/usr/bin/python3
"""What the shipped model (qwen3-kerneldoc) writes, kept apart by the template (issue 24):
- a plain completion never drifts into the chat training: no xdp-gen system prompt or task
  line, no chat role markers, greedy or sampled. It may end at one of the model's end-of-text
  tokens (<|im_end|>, <|endoftext|>: generation_config.json's eos_token_id), where generation
  stops;
- a chat answer to a question that is not about code, sampled as the model's
  generation_config.json says (what `qwen3-bpf chat` does), is prose, not a C code block.

Deterministic: greedy and seeded sampling on the reference backend, one thread.

usage: shipped_text_test.py QWEN3_BPF_RUN TRAINED_MODEL_DIR
"""
import json
import re
import subprocess
import sys
import unittest

RUN, MODEL = sys.argv[1], sys.argv[2]
PLAIN_PROMPTS = ["The BPF verifier", "struct sk_buff is", "An XDP program", "The kernel", "BPF maps are used to",
                 "To load a program"]
CHAT_QUESTIONS = ["What is a BPF map?", "How does the scheduler pick the next task?"]
# Text of the chat training's framing: xdp-gen's system prompt and task line, the code turns'
# system prompt, and the template's markers.
LEAKS = ["Answer with one", "code block", "You write eBPF", "Reply with exactly one", "No test packets are given",
         "compiled with clang -O2", "<|im_start|>", "<think>", "Task:"]
EOS_TEXT = ("<|im_end|>", "<|endoftext|>")
# The model's generation_config.json sampling (two seeds), and greedy with its repetition penalty.
SAMPLED = [["-t", "0.7", "--sample-top-k", "20", "--top-p", "0.9", "--repetition-penalty", "1.1", "--seed", str(s)]
           for s in (1, 2)]
SETTINGS = [["-t", "0", "--repetition-penalty", "1.1"]] + SAMPLED


def generate(prompt, settings, *extra, n=64):
    """The generated text (decoded with special tokens shown as text by the stream decoder)."""
    p = subprocess.run([RUN, "--model", MODEL, "--backend", "reference", "--threads", "1", "--prompt", prompt,
                        "-n", str(n), "--top-k", "1", *settings, *extra], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"qwen3-bpf-run {prompt!r} {settings} failed ({p.returncode}): {p.stderr}")
    m = re.search(r"^generated: (.*)\Z", p.stdout, re.S | re.M)
    if not m:
        raise AssertionError(f"no 'generated:' in qwen3-bpf-run's output: {p.stdout!r}")
    text = m.group(1).rstrip("\n")
    for eos in EOS_TEXT:  # the stop token, shown as text by the stream decoder: the end, not content
        if text.endswith(eos):
            text = text[:-len(eos)]
    return text


class ShippedText(unittest.TestCase):
    def test_plain_completions_carry_no_chat_framing(self):
        for prompt in PLAIN_PROMPTS:
            for settings in SETTINGS:
                text = generate(prompt, settings)
                self.assertGreater(len(text.strip()), 0, (prompt, settings))
                for leak in LEAKS + list(EOS_TEXT):
                    self.assertNotIn(leak, text, f"plain completion of {prompt!r} with {settings}: {text!r}")

    def test_chat_answers_to_questions_are_prose(self):
        for question in CHAT_QUESTIONS:
            for settings in SAMPLED:
                text = generate(question, settings, "--chat", "--no-think", n=96)
                where = f"chat answer to {question!r} with {settings}: {text!r}"
                for code in ("```", "#include", "SEC(", "int main", "return 0;"):
                    self.assertNotIn(code, text, where)
                words = re.findall(r"[A-Za-z]{2,}", text)
                self.assertGreaterEqual(len(words), 8, where)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
