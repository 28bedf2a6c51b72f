#!/usr/bin/python3
"""The UDP endpoint of kernel clients (docs/kernel-clients.md), end to end.

The test moves itself into a private network namespace first: the daemon's XDP
program attaches to that namespace's own loopback (generic mode), every
datagram goes between 127.0.0.0/8 addresses on it, and nothing touches the
host's interfaces. Datagrams are built in Python (kclient_wire.py) from the
header's layout, independently of the C++ client.

Environment (set by CMake): QWEN3_BPFD, QWEN3_CLI, QWEN3_TEST_MODEL, QWEN3_PROTO_DIR.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import daemon_test as dt  # noqa: E402  (the daemon harness: stubs, start_daemon)
import kclient_wire as w  # noqa: E402

CLI = os.environ.get("QWEN3_CLI", "")
MODEL = os.environ.get("QWEN3_TEST_MODEL", "")
PORT = 7070
OWNER = 4242
RATE = 20


def xdp_programs_of(pid):
    """XDP programs (prog_type 6) the process holds, from /proc/<pid>/fdinfo."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                if "prog_type:\t6\n" in f.read():
                    n += 1
        except OSError:
            pass
    return n


class Daemon:
    """qwen3-bpfd in a temp dir with `keys`, in the current network namespace."""

    def __init__(self, **keys):
        self.tmp = tempfile.mkdtemp(prefix="qwen3-kclient-")
        dt.generate_stubs(os.path.join(self.tmp, "stubs"))
        self.sock = os.path.join(self.tmp, "s.sock")
        conf = os.path.join(self.tmp, "c.conf")
        lines = dict(model_dir=MODEL, socket_path=self.sock, state_dir=self.tmp, persist_sessions="false",
                     log_level="info", socket_group="", max_sessions_per_uid="12", max_sessions="16")
        lines.update(keys)
        with open(conf, "w") as f:
            f.write("".join(f"{k} = {v}\n" for k, v in lines.items()))
        self.log = os.path.join(self.tmp, "daemon.log")
        self.proc = dt.start_daemon(conf, self.log, self.sock, 120)
        self.stub = dt.pb_grpc.Qwen3BpfStub(dt.grpc.insecure_channel("unix:" + self.sock))

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(30)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return code

    def metrics(self):
        """/metrics over the HTTP socket: {'name{labels}': value}."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(30)
            c.connect(os.path.join(self.tmp, "http.sock"))
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := c.recv(65536):
                data += chunk
        out = {}
        for line in data.partition(b"\r\n\r\n")[2].decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out


def kc(m, family, outcome):
    return m.get(f'qwen3_bpfd_kclient_{family}_total{{outcome="{outcome}"}}', 0)


class UdpEndpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (dt.DAEMON and MODEL and dt.PROTO_DIR and CLI):
            raise RuntimeError("QWEN3_BPFD, QWEN3_CLI, QWEN3_TEST_MODEL and QWEN3_PROTO_DIR must be set")
        w.enter_private_netns()
        cls.d = Daemon(udp_endpoint=f"lo:{PORT}", kernel_client_uid=str(OWNER), udp_rate_limit=str(RATE),
                       socket_group="nogroup")  # nogroup: `nobody` may connect (test_e)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def grpc_greedy(self, ids, n):
        msgs = self.d.stub.Generate(dt.pb.GenerateRequest(
            token_ids=ids, sampling=dt.pb.SamplingParams(temperature=0),
            stopping=dt.pb.StoppingCriteria(max_new_tokens=n)), timeout=60)
        return [m.token_id for m in msgs if m.token_id >= 0]

    def test_a_endpoint_is_attached_in_generic_mode(self):
        link = subprocess.run(["ip", "-d", "link", "show", "lo"], capture_output=True, text=True).stdout
        self.assertIn("xdpgeneric", link)
        self.assertIn("qk_endpoint", link)
        self.assertEqual(xdp_programs_of(self.d.proc.pid), 1)

    def test_b_sessions_multi_token_and_kv_reuse(self):
        prompts = {"kc-a": [9707, 11, 1879], "kc-b": [785, 10001], "kc-c": [40, 1079, 264, 1273]}
        results = {}

        def run(i, session, ids):
            c = w.Client(PORT, f"127.0.0.{10 + i}")
            results[session] = c.run(100 + i, session, ids, max_tokens=6, text=False)
            c.close()

        threads = [threading.Thread(target=run, args=(i, s, ids)) for i, (s, ids) in enumerate(prompts.items())]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for session, ids in prompts.items():
            a, entries = results[session]
            self.assertEqual(w.FINISH[a["finish"]], "length", a)
            got = [e["id"] for e in entries if not e["flags"]]
            self.assertEqual(len(got), 6)
            # Real inference: the same ids as a greedy gRPC request.
            self.assertEqual(got, self.grpc_greedy(ids, 6), session)
            self.assertEqual(a["positions"], len(ids) + 6 - 1)

        # The next datagram of a session continues it: its KV is reused, only new tokens are computed.
        c = w.Client(PORT, "127.0.0.10")
        first, _ = results["kc-a"]
        a, entries = c.run(200, "kc-a", [13, 576], max_tokens=5, text=False)
        self.assertEqual(a["cached_tokens"], first["positions"])
        self.assertEqual(a["prompt_tokens"] - a["cached_tokens"], 2 + 1)  # the new ids and the last answer token
        self.assertEqual(a["positions"], first["positions"] + 3 + 5 - 1)
        # Text prompts are tokenized by the daemon; the CLI prints the streamed text.
        r = subprocess.run([CLI, "udp", "--to", f"127.0.0.1:{PORT}", "--session", "kc-cli", "-n", "7", "--stats",
                            "--temperature", "0", "Hello there"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("finish 1, 7 tokens", r.stderr)
        ids = list(self.d.stub.Tokenize(dt.pb.TokenizeRequest(text="Hello there"), timeout=10).ids)
        text = self.d.stub.Detokenize(dt.pb.DetokenizeRequest(ids=self.grpc_greedy(ids, 7)), timeout=10).text
        self.assertEqual(r.stdout, text + "\n")
        # Root sees them, owned by kernel_client_uid, with their positions.
        r = subprocess.run([CLI, "--socket", self.d.sock, "sessions", "list"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:] if l.strip()}
        for s in ("kc-a", "kc-b", "kc-c", "kc-cli"):
            self.assertEqual(rows[s][1], str(OWNER), r.stdout)
        self.assertEqual(rows["kc-a"][2], str(a["positions"]))

    def test_e_sessions_are_owned_like_api_sessions(self):
        # A gRPC user other than root and kernel_client_uid neither sees nor deletes them.
        c = w.Client(PORT, "127.0.0.40")
        c.run(500, "kc-own", [9707], max_tokens=2, text=False)
        os.chmod(self.d.tmp, 0o755)
        os.chmod(self.d.sock, 0o666)
        stubs = os.path.join(self.d.tmp, "stubs")
        listing = "print([s.session_id for s in stub.ListSessions(pb.ListSessionsRequest(), timeout=5).sessions])"
        self.assertEqual(dt.run_client_as(stubs, self.d.sock, "nobody", listing), "[]\nOK")
        for call in ("stub.GetSession(pb.GetSessionRequest(session_id='kc-own'), timeout=5)",
                     "stub.DeleteSession(pb.DeleteSessionRequest(session_id='kc-own'), timeout=5)"):
            out = dt.run_client_as(stubs, self.d.sock, "nobody", call)
            self.assertTrue(out.startswith("NOT_FOUND"), out)
        self.assertEqual(self.d.stub.GetSession(dt.pb.GetSessionRequest(session_id="kc-own"), timeout=5)
                         .session.owner_uid, OWNER)
        # And a kernel client cannot use root's session: not found, as for any other uid.
        self.d.stub.CreateSession(dt.pb.CreateSessionRequest(max_context=64, session_id="root-own"), timeout=30)
        a, entries = c.run(501, "root-own", [9707], max_tokens=2, text=False)
        self.assertEqual((w.FINISH[a["finish"]], a["error"], entries), ("error", 4, []))
        self.assertEqual(self.d.stub.GetSession(dt.pb.GetSessionRequest(session_id="root-own"), timeout=5)
                         .session.positions, 0)
        c.close()

    def test_c_cancel_ends_the_generation_within_a_token(self):
        c = w.Client(PORT, "127.0.0.20")
        c.send(w.generate(300, "kc-cancel", [9707, 11], max_tokens=2000, text=False))
        seen = []
        deadline = time.monotonic() + 60
        nxt = 0
        while len(seen) < 4 and time.monotonic() < deadline:
            a = c.poll(300, "kc-cancel", nxt)
            if a and a["status"] == 0:
                seen += a["entries"]
                nxt += len(a["entries"])
        self.assertGreaterEqual(len(seen), 4)
        c.send(w.header(w.CANCEL, 300, "kc-cancel"))
        # The XDP program set the flag while the send ran; what this poll shows was generated by then or later.
        after = c.poll(300, "kc-cancel", nxt)
        self.assertIsNotNone(after)
        a, _ = c.collect(300, "kc-cancel", timeout=30)
        self.assertEqual(w.FINISH[a["finish"]], "cancelled")
        # The step running when the flag was set may still emit its token; no step starts after it.
        self.assertLessEqual(a["tokens"] - after["tokens"], 1, (after, a))
        self.assertLess(a["tokens"], 2000)
        # The session stays usable, and in step.
        a2, _ = c.run(301, "kc-cancel", [13], max_tokens=2, text=False)
        self.assertEqual(w.FINISH[a2["finish"]], "length")
        self.assertEqual(a2["cached_tokens"], a["positions"])
        c.close()

    def test_c2_ctrl_c_in_the_cli_cancels_by_datagram(self):
        m0 = self.d.metrics()
        p = subprocess.Popen([CLI, "udp", "--to", f"127.0.0.1:{PORT}", "--session", "kc-int", "-n", "3000",
                              "--temperature", "0", "Hello"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:  # until it streams: the session shows positions
            self.assertLess(time.monotonic(), deadline, "the CLI never started streaming")
            try:
                if self.d.stub.GetSession(dt.pb.GetSessionRequest(session_id="kc-int"), timeout=5).session.busy:
                    break
            except dt.grpc.RpcError:
                pass
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 130, err)
        m = self.d.metrics()
        self.assertEqual(kc(m, "requests", "cancelled") - kc(m0, "requests", "cancelled"), 1)
        self.assertGreaterEqual(kc(m, "datagrams", "cancel") - kc(m0, "datagrams", "cancel"), 1)
        s = self.d.stub.GetSession(dt.pb.GetSessionRequest(session_id="kc-int"), timeout=5).session
        self.assertFalse(s.busy)
        self.assertLess(s.positions, 3000)

    def test_d_malformed_and_floods_are_counted_and_the_api_still_answers(self):
        m0 = self.d.metrics()
        good = w.generate(400, "kc-flood", [9707], max_tokens=1, text=False)
        bad = [
            b"", b"x", b"\0" * 47, good[:60],                               # too short
            b"XXXX" + good[4:],                                             # magic
            good[:4] + b"\x09\x00" + good[6:],                              # version
            good[:6] + b"\x09" + good[7:],                                  # kind
            good[:7] + b"\x80" + good[8:],                                  # flags
            good[:8] + b"\0\0\0\0" + good[12:],                             # request id 0
            good[:16] + b"bad session!".ljust(32, b"\0") + good[48:],        # session characters
            good[:16] + b"\0" * 32 + good[48:],                             # empty session
            good[:48] + b"\0\0" + good[50:],                                # max_tokens 0
            good[:50] + b"\xff\x00" + good[52:],                            # prompt longer than the datagram
            w.poll_datagram(400, "kc-flood", 0)[:-1],                       # poll of the wrong size
            w.header(w.CANCEL, 400, "kc-flood") + b"x",                     # cancel of the wrong size
        ]
        c = w.Client(PORT, "127.0.0.30")
        for b in bad:
            c.send(b)
        # A flood from one source: its token bucket passes RATE, drops the rest.
        flood = 300
        t0 = time.monotonic()
        for i in range(flood):
            c.send(w.generate(1000 + i, "kc-flood", [9707], max_tokens=1, text=False))
        # Meanwhile the gRPC API answers at once.
        status = self.d.stub.GetStatus(dt.pb.GetStatusRequest(), timeout=5)
        self.assertEqual(status.load_state, dt.pb.LOAD_STATE_READY)
        # Many sources at once: more requests than the queue and the slots hold, each counted once.
        many = 120
        clients = [w.Client(PORT, f"127.0.1.{i}") for i in range(1, many + 1)]
        for i, cl in enumerate(clients):
            cl.send(w.generate(5000 + i, f"kc-many-{i % 4}", [9707], max_tokens=1, text=False))
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(len(self.grpc_greedy([9707], 2)), 2)

        def settled():
            m = self.d.metrics()
            sub = kc(m, "datagrams", "submitted") - kc(m0, "datagrams", "submitted")
            done = sum(kc(m, "requests", o) - kc(m0, "requests", o)
                       for o in ("served", "failed", "busy", "no_slot", "invalid"))
            return m if sub == done else None

        deadline = time.monotonic() + 60
        while not (m := settled()):
            self.assertLess(time.monotonic(), deadline, "submitted requests never all accounted for")
            time.sleep(0.2)
        delta = {o: kc(m, "datagrams", o) - kc(m0, "datagrams", o) for o in
                 ("malformed", "rate_limited", "shed", "submitted")}
        self.assertEqual(delta["malformed"], len(bad), delta)
        self.assertEqual(delta["rate_limited"] + delta["shed"] + delta["submitted"], flood + many, delta)
        self.assertGreaterEqual(delta["rate_limited"], flood - 3 * RATE, delta)
        self.assertLessEqual(delta["submitted"], 3 * RATE + many, delta)
        for cl in clients:
            cl.close()
        self.assertEqual(self.d.proc.poll(), None)
        self.assertEqual(len(self.grpc_greedy([9707], 2)), 2)


class EndpointOffTest(unittest.TestCase):
    def test_no_xdp_program_is_attached_when_the_endpoint_is_off(self):
        if not (dt.DAEMON and MODEL and dt.PROTO_DIR):
            raise RuntimeError("QWEN3_BPFD, QWEN3_TEST_MODEL and QWEN3_PROTO_DIR must be set")
        w.enter_private_netns()
        d = Daemon()
        try:
            link = subprocess.run(["ip", "-d", "link", "show", "lo"], capture_output=True, text=True).stdout
            self.assertNotIn("xdp", link)
            self.assertEqual(xdp_programs_of(d.proc.pid), 0)
            m = d.metrics()
            self.assertFalse(any(k.startswith("qwen3_bpfd_kclient_") for k in m), "kernel-client metrics while off")
            # A datagram to the port finds nothing (no program, no socket): no answer.
            c = w.Client(PORT)
            self.assertIsNone(c.poll(1, "x", 0))
        finally:
            self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
