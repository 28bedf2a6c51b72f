#!/usr/bin/python3
"""Checks qwen3-bpf-run's documented behaviour on a generated tiny model.

usage: run_tool_test.py QWEN3_BPF_RUN MODEL_DIR BACKEND
"""
import json
import subprocess
import sys
import unittest

RUN, MODEL, BACKEND = sys.argv[1], sys.argv[2], sys.argv[3]


def run(*args, check=True):
    p = subprocess.run([RUN, "--model", MODEL, "--backend", BACKEND, *args],
                       capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"qwen3-bpf-run {args} failed ({p.returncode}): {p.stderr}")
    return p


class RunTool(unittest.TestCase):
    def test_json_shape_and_greedy_consistency(self):
        out = json.loads(run("--prompt", "The kernel verifier says", "--generate", "6",
                             "--top-k", "4", "--json").stdout)
        self.assertEqual(len(out["generated"]), 6)
        self.assertEqual(len(out["topk"]), 4)
        logits = [l for _, l in out["topk"]]
        self.assertEqual(logits, sorted(logits, reverse=True))
        # Greedy: the first generated token is the top-1 of the first distribution.
        self.assertEqual(out["generated"][0], out["topk"][0][0])

    def test_ids_and_prompt_agree(self):
        # "abc def" is two tokens in Qwen3's vocabulary: 13683 ("abc"), 707 (" def").
        by_prompt = json.loads(run("--prompt", "abc def", "--score").stdout)["argmax"]
        by_ids = json.loads(run("--ids", "13683", "707", "--score").stdout)["argmax"]
        self.assertEqual(by_prompt, by_ids)

    def test_score_is_teacher_forced_argmax(self):
        prompt_ids = ["9707", "11", "1879", "0", "576", "374"]
        score = json.loads(run("--ids", *prompt_ids, "--score").stdout)["argmax"]
        self.assertEqual(len(score), len(prompt_ids))
        # The last position's argmax is what greedy generation picks next.
        gen = json.loads(run("--ids", *prompt_ids, "--generate", "1", "--json").stdout)["generated"]
        self.assertEqual(score[-1], gen[0])
        # Teacher forcing: position i's argmax depends only on tokens <= i.
        prefix = json.loads(run("--ids", *prompt_ids[:3], "--score").stdout)["argmax"]
        self.assertEqual(prefix, score[:3])

    def test_bad_input_is_a_clear_error(self):
        p = run("--ids", "999999999", "--score", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("vocab", p.stderr)
        p = run("--score", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--ids or --prompt", p.stderr)
        p = subprocess.run([RUN, "--model", "/nonexistent/model", "--ids", "1"],
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("/nonexistent/model", p.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
