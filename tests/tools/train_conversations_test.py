#!/usr/bin/python3
"""tools/train/conversations.py: section titles become questions, the prose of each section the
answer (no literal blocks, directives or tables), rendered in the chat template with thinking off.

usage: train_conversations_test.py REPO_ROOT
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(sys.argv[1], "tools", "train"))
import conversations  # noqa: E402

DOC = """\
=========
eBPF maps
=========

'maps' is a generic storage of different types for sharing data between kernel
and userspace, accessed with ``bpf()`` commands.

Example::

    int fd = bpf(BPF_MAP_CREATE, &attr, sizeof(attr));

Q: Can BPF programs access the stack pointer?
---------------------------------------------
A: NO. Only the frame pointer (register R10) is accessible to a BPF program,
which is all the compiler needs.

.. code-block:: c

    r10 = 0;

Introduction
------------
+-----+-----+
| a   | b   |
+-----+-----+

Maps are created by user space and shared with programs by file descriptor;
programs reach them with helper calls.

See also
--------
Some other document that says nothing about maps themselves at all, really.
"""


class Conversations(unittest.TestCase):
    def test_sections_become_questions_with_prose_answers(self):
        qa = conversations.questions_and_answers("Documentation/bpf/maps.rst", DOC)
        self.assertEqual(len(qa), 3, qa)  # "See also" is left out
        (q0, a0), (q1, a1), (q2, a2) = qa
        self.assertIn("eBPF maps", q0)
        self.assertTrue(a0.startswith("'maps' is a generic storage"), a0)
        self.assertIn("`bpf()`", a0)  # RST literals as a reader writes them
        self.assertEqual(q1, "Can BPF programs access the stack pointer?")
        self.assertTrue(a1.startswith("NO. Only the frame pointer"), a1)  # "A:" dropped
        self.assertIn("eBPF maps", q2)  # a generic title is asked about the document's subject
        self.assertIn("introduction", q2)
        self.assertTrue(a2.startswith("Maps are created by user space"), a2)
        for _, a in qa:
            for code in ("BPF_MAP_CREATE", "r10 = 0", "Example", "+-----", "code-block"):
                self.assertNotIn(code, a)

    def test_rendered_in_the_chat_template_with_thinking_off(self):
        texts = conversations.render_conversations("Documentation/bpf/maps.rst", DOC)
        self.assertEqual(len(texts), 1)  # three turns fit one conversation
        t = texts[0]
        self.assertEqual(t.count("<|im_start|>user\n"), 3)
        self.assertEqual(t.count("<|im_start|>assistant\n<think>\n\n</think>\n\n"), 3)
        self.assertTrue(t.endswith("<|im_end|>\n"))
        self.assertNotIn("```", t)
        if t.startswith("<|im_start|>system\n"):
            self.assertIn(conversations.GENERIC_SYSTEM_PROMPT, t)
        else:
            self.assertTrue(t.startswith("<|im_start|>user\n"))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
