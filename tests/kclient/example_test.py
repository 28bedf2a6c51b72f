#!/usr/bin/python3
"""The example kernel client (examples/exec_prompt) on the kernel path, end to
end: the daemon pins its maps, the example's loader attaches a tp_btf program
on sched_process_exec, pins the link and exits. Then, with the daemon frozen
(SIGSTOP: every thread stopped), an exec of the chosen program submits its
command line and rings the engine's doorbell: the kernel maps the bytes to
base token ids, generates, and writes the answer into the pinned kd_results,
read back with bpftool (not with the example's own reader). After SIGCONT the
daemon serves gRPC and lists the kernel session with its positions; a
kernel-started generation and a gRPC generation submitted together both give
the tokens they give alone.

Environment (set by CMake): QWEN3_BPFD, QWEN3_EXEC_PROMPT, QWEN3_TEST_MODEL, QWEN3_PROTO_DIR.
"""

import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
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
KD_SESSION = struct.Struct("<32sIIIIIiIIIIQ")  # qk_kd_session
KD_SESSIONS = 4
MAX_TOKENS = 8
PROMPT = "hello kernel world"


def lookup(pinned, key_bytes):
    """The value of `key_bytes` in a pinned map, as bytes, through bpftool."""
    r = subprocess.run([BPFTOOL, "-j", "map", "lookup", "pinned", pinned, "key", "hex",
                        *[f"{b:02x}" for b in key_bytes]], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return None
    value = json.loads(r.stdout)["value"]
    return bytes(int(b, 16) for b in value)


def kernel_answer(pin, session, request_id=None, timeout=60):
    """(slot head fields, entries) of `session`'s finished kd_results slot."""
    deadline = time.monotonic() + timeout
    name = session.encode().ljust(32, b"\0")
    while time.monotonic() < deadline:
        for k in range(KD_SESSIONS):
            key = struct.pack("<I", k)
            s = lookup(os.path.join(pin, "kd_sessions"), key)
            if not s or KD_SESSION.unpack_from(s)[0] != name or not KD_SESSION.unpack_from(s)[1]:
                continue
            slot = lookup(os.path.join(pin, "kd_results"), key)
            head = SLOT_HEAD.unpack_from(slot)
            if head[3] and (request_id is None or head[1] == request_id):  # finish
                entries = [TOKEN.unpack_from(slot, SLOT_HEAD.size + i * TOKEN.size) for i in range(head[2])]
                return head, entries
        time.sleep(0.05)
    raise AssertionError(f"no finished answer for {session} in kd_results")


def state_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(line.split()[1] for line in f if line.startswith("State:"))


class ExampleClientTest(unittest.TestCase):
    def greedy(self, d, ids, n):
        msgs = d.stub.Generate(dt.pb.GenerateRequest(token_ids=ids, sampling=dt.pb.SamplingParams(temperature=0),
                                                     stopping=dt.pb.StoppingCriteria(max_new_tokens=n)), timeout=120)
        return [m.token_id for m in msgs if m.token_id >= 0]

    def test_exec_gets_an_answer_from_the_kernel_with_the_daemon_frozen(self):
        if not (dt.DAEMON and udp_test.MODEL and dt.PROTO_DIR and LOADER):
            raise RuntimeError("QWEN3_BPFD, QWEN3_EXEC_PROMPT, QWEN3_TEST_MODEL and QWEN3_PROTO_DIR must be set")
        pin = f"/sys/fs/bpf/qwen3-kctest-{os.getpid()}"
        comm = f"qk-ask-{os.getpid() % 100000}"
        d = udp_test.Daemon(kernel_client_pin_dir=pin, kernel_client_uid="4243", driver="auto")
        self.addCleanup(shutil.rmtree, pin, True)
        frozen = False
        try:
            self.assertEqual(udp_test.xdp_programs_of(d.proc.pid), 0)  # no endpoint: no XDP program
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(pin, "kd_bell")):  # the kernel path, once loaded
                self.assertLess(time.monotonic(), deadline, "the kernel path's maps were not pinned")
                time.sleep(0.1)
            for name in ("qk_submit", "qk_results", "kd_requests", "kd_bell", "kd_state", "kd_sessions", "kd_results"):
                st = os.stat(os.path.join(pin, name))
                self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, 0), name)

            r = subprocess.run([LOADER, "attach", pin, comm, "exec-demo", str(MAX_TOKENS)], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)  # the loader has exited; the pinned link stays
            self.addCleanup(subprocess.run, [LOADER, "detach", pin])
            target = os.path.join(d.tmp, comm)
            shutil.copy("/bin/true", target)

            # Every thread of the daemon stopped: no user-space process in the path.
            os.kill(d.proc.pid, signal.SIGSTOP)
            frozen = True
            deadline = time.monotonic() + 10
            while state_of(d.proc.pid) != "T":
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.01)
            subprocess.run([target, *PROMPT.split()], check=True, timeout=30)
            head, entries = kernel_answer(pin, "exec-demo")
            self.assertEqual(state_of(d.proc.pid), "T")  # still frozen when the answer was there
            os.kill(d.proc.pid, signal.SIGCONT)
            frozen = False

            (_, _request, produced, finish, error, _c, _a, positions, prompt_tokens, cached, tokens, _l) = head
            self.assertEqual(error, 0)
            self.assertIn(finish, (1, 2))  # length, or eos
            ids = [e[0] for e in entries if e[4] == 0]
            self.assertEqual(len(ids), tokens)
            # What the model saw: each byte's base token (not the BPE merges).
            byte_ids = [d.stub.Tokenize(dt.pb.TokenizeRequest(text=c), timeout=10).ids[0] for c in PROMPT]
            self.assertEqual((prompt_tokens, cached), (len(byte_ids), 0))
            self.assertEqual(ids, self.greedy(d, byte_ids, MAX_TOKENS)[:len(ids)])
            if finish == 1:
                self.assertEqual(tokens, MAX_TOKENS)
            self.assertEqual(positions, len(byte_ids) + tokens - 1)
            text = b"".join(e[5][:e[3]] for e in entries)
            self.assertEqual(text, d.stub.Detokenize(dt.pb.DetokenizeRequest(ids=ids, skip_special_tokens=True),
                                                     timeout=10).text.encode())
            # The session as root sees it: owned by kernel_client_uid, its positions.
            listed = {s.session_id: s for s in d.stub.ListSessions(dt.pb.ListSessionsRequest(), timeout=10).sessions}
            self.assertEqual((listed["exec-demo"].owner_uid, listed["exec-demo"].positions), (4243, positions))

            # Two masters at once: a gRPC generation and a kernel-started one, both exact.
            api_prompt = [b + 1 for b in byte_ids]
            api_alone = self.greedy(d, api_prompt, 24)
            got = {}
            t = threading.Thread(target=lambda: got.update(api=self.greedy(d, api_prompt, 24)))
            t.start()
            time.sleep(0.05)
            subprocess.run([target, *PROMPT.split()], check=True, timeout=30)
            t.join(120)
            head2, entries2 = kernel_answer(pin, "exec-demo", request_id=head[1] + 1)
            self.assertEqual(got["api"], api_alone)
            self.assertEqual([e[0] for e in entries2 if e[4] == 0], ids)
            m = d.metrics()
            self.assertEqual(m['qwen3_bpfd_kclient_kernel_requests_total{outcome="served"}'], 2)
            print("kernel path:", {k.split("kernel_")[1]: v for k, v in m.items() if "kclient_kernel" in k},
                  file=sys.stderr)
        finally:
            if frozen:
                os.kill(d.proc.pid, signal.SIGCONT)
            self.assertEqual(d.stop(), 0)
        self.assertFalse(os.path.exists(os.path.join(pin, "kd_bell")), "pins left after the daemon stopped")


if __name__ == "__main__":
    unittest.main(verbosity=2)
