#!/usr/bin/python3
"""The example kernel client (examples/exec_prompt), end to end: the daemon
pins its maps, the example's loader attaches a raw tracepoint on
sched_process_exec, pins the link and exits; an exec of the chosen program
then submits its command line from the kernel, and the model's continuation
is read back from the pinned result map with bpftool (not with the example's
own reader).

Environment (set by CMake): QWEN3_BPFD, QWEN3_EXEC_PROMPT, QWEN3_TEST_MODEL, QWEN3_PROTO_DIR.
"""

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import daemon_test as dt  # noqa: E402
import udp_test  # noqa: E402  (Daemon, xdp_programs_of)

LOADER = os.environ.get("QWEN3_EXEC_PROMPT", "")
BPFTOOL = shutil.which("bpftool") or "/usr/sbin/bpftool"
SLOT_HEAD = struct.Struct("<32sIIIIIIIIIIQ")  # qk_result_slot up to the ring
TOKEN = struct.Struct("<iIHBB20s")
MAX_TOKENS = 8


def lookup(pinned, key_bytes):
    """The value of `key_bytes` in a pinned map, as bytes, through bpftool."""
    r = subprocess.run([BPFTOOL, "-j", "map", "lookup", "pinned", pinned, "key", "hex",
                        *[f"{b:02x}" for b in key_bytes]], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return None
    value = json.loads(r.stdout)["value"]
    return bytes(int(b, 16) for b in value)


class ExampleClientTest(unittest.TestCase):
    def test_exec_of_the_chosen_program_gets_an_answer_with_no_user_process(self):
        if not (dt.DAEMON and udp_test.MODEL and dt.PROTO_DIR and LOADER):
            raise RuntimeError("QWEN3_BPFD, QWEN3_EXEC_PROMPT, QWEN3_TEST_MODEL and QWEN3_PROTO_DIR must be set")
        pin = f"/sys/fs/bpf/qwen3-kctest-{os.getpid()}"
        comm = f"qk-ask-{os.getpid() % 100000}"
        d = udp_test.Daemon(kernel_client_pin_dir=pin, kernel_client_uid="4243")
        self.addCleanup(shutil.rmtree, pin, True)
        try:
            self.assertEqual(udp_test.xdp_programs_of(d.proc.pid), 0)  # no endpoint: no XDP program
            for name in ("qk_submit", "qk_results", "qk_sessions", "qk_counters"):
                st = os.stat(os.path.join(pin, name))
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, name)
                self.assertEqual(st.st_uid, 0, name)

            r = subprocess.run([LOADER, "attach", pin, comm, "exec-demo", str(MAX_TOKENS)], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)  # the loader has exited; the pinned link stays
            self.addCleanup(subprocess.run, [LOADER, "detach", pin])
            target = os.path.join(d.tmp, comm)
            shutil.copy("/bin/true", target)
            subprocess.run([target, "hello", "kernel", "world"], check=True, timeout=30)

            key = b"exec-demo".ljust(32, b"\0")
            deadline = time.monotonic() + 60
            while True:
                idx = lookup(os.path.join(pin, "qk_sessions"), key)
                slot = idx and lookup(os.path.join(pin, "qk_results"), idx)
                if slot and SLOT_HEAD.unpack_from(slot)[3]:  # finish
                    break
                self.assertLess(time.monotonic(), deadline, "no finished answer in the result map")
                time.sleep(0.1)
            (_, request_id, produced, finish, error, _cancel, _acked, positions, prompt_tokens, _cached, tokens,
             _last) = SLOT_HEAD.unpack_from(slot)
            self.assertEqual((finish, error), (1, 0))  # length, no error
            self.assertEqual(tokens, MAX_TOKENS)
            entries = [TOKEN.unpack_from(slot, SLOT_HEAD.size + i * TOKEN.size) for i in range(produced)]
            ids = [e[0] for e in entries if e[4] == 0]
            text = b"".join(e[5][:e[3]] for e in entries).decode()

            # The same greedy request over gRPC: same prompt tokens, same ids, same text.
            prompt = list(d.stub.Tokenize(dt.pb.TokenizeRequest(text="hello kernel world"), timeout=10).ids)
            self.assertEqual(prompt_tokens, len(prompt))
            msgs = list(d.stub.Generate(dt.pb.GenerateRequest(
                prompt="hello kernel world", sampling=dt.pb.SamplingParams(temperature=0),
                stopping=dt.pb.StoppingCriteria(max_new_tokens=MAX_TOKENS)), timeout=60))
            self.assertEqual(ids, [m.token_id for m in msgs if m.token_id >= 0])
            self.assertEqual(text, "".join(m.text for m in msgs))
            self.assertEqual(positions, len(prompt) + MAX_TOKENS - 1)
            # The session is a real one, owned by kernel_client_uid, visible to root.
            s = d.stub.GetSession(dt.pb.GetSessionRequest(session_id="exec-demo"), timeout=10).session
            self.assertEqual((s.owner_uid, s.positions), (4243, positions))
        finally:
            self.assertEqual(d.stop(), 0)
        self.assertFalse(os.path.exists(os.path.join(pin, "qk_submit")), "pins left after the daemon stopped")


if __name__ == "__main__":
    unittest.main(verbosity=2)
