#!/usr/bin/python3
"""Sessions that move between daemons (docs/api.md, "Moving sessions").

Four daemons on the generated `tiny` model: A and B alike (q8, 8-bit K/V),
C at q24 with 16-bit K/V, D on `tiny-outliers` (the same config.json, other
weights). Checked:
- a session exported from A with its KV and imported into B continues
  bit-identically (the same top-20 logits, the same greedy tokens, the same KV
  bytes afterwards) as the session that stayed on A; so does one imported
  without KV (tokens only, or --recompute), its KV recomputed;
- refused with a message naming the difference: KV of another precision and
  layout (C; --recompute then works), another model (D), a truncated, altered,
  foreign or other-version file;
- ownership: the owner is kept (a TCP client's session imported by root stays
  the TCP uid's); a non-root caller (nobody, TCP clients) cannot import a
  session owned by another uid;
- HTTP export/import and session endpoints; `qwen3-bpf drain --to SOCKET`.
"""

import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import unittest

DAEMON = os.environ.get("QWEN3_BPFD", "")
CLI = os.environ.get("QWEN3_CLI", "")
MODELS = os.environ.get("QWEN3_TEST_MODELS", "")
TCP_UID = 4294967294


def listening_socket():
    """A TCP listener the test holds from bind to the daemon's exit, passed by
    socket activation: a port picked here and bound later by the daemon could
    be taken in between by another test's client under ctest -j."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


def activated(argv, fd):
    """argv run with fd as systemd's first socket named http-tcp: LISTEN_PID
    must be the daemon's own pid, which only the exec'ing shell knows."""
    return ["/bin/sh", "-c", f'exec 3<&{fd} {fd}<&-; LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=http-tcp exec "$@"',
            "sh", *argv]


def kv_part(data):
    """The KV bytes and the parsed header of an export file (session_file.h)."""
    hlen = struct.unpack_from("<I", data, 12)[0]
    header = json.loads(data[16:16 + hlen])
    klen = struct.unpack_from("<Q", data, 16 + hlen)[0]
    return header, data[24 + hlen:24 + hlen + klen]


class SessionTransferTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="qwen3-transfer-")
        os.chmod(cls.tmp, 0o755)
        cls.token = "tok-" + os.urandom(6).hex()
        with open(os.path.join(cls.tmp, "token"), "w") as f:
            f.write(cls.token)
        os.chmod(os.path.join(cls.tmp, "token"), 0o600)
        spec = {"A": ("tiny", "q8", 8), "B": ("tiny", "q8", 8), "C": ("tiny", "q24", 16), "D": ("tiny-outliers", "q8", 8)}
        cls.tcp = listening_socket()
        cls.procs, cls.port = {}, cls.tcp.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in ("LISTEN_FDS", "LISTEN_PID", "NOTIFY_SOCKET")}
        for name, (model, precision, kv_bits) in spec.items():
            d = os.path.join(cls.tmp, name)
            os.makedirs(d)
            os.chmod(d, 0o755)
            extra = f"http_token_file = {cls.tmp}/token\n" if name == "B" else ""
            with open(os.path.join(d, "conf"), "w") as f:
                f.write(f"model_dir = {MODELS}/{model}\nprecision = {precision}\nkv_bits = {kv_bits}\n"
                        f"socket_path = {d}/grpc.sock\nhttp_socket = {d}/http.sock\nsocket_group = nogroup\n"
                        f"state_dir = {d}/state\nthreads = 1\ndefault_context = 256\n{extra}")
            log = open(os.path.join(d, "log"), "w")
            argv = [DAEMON, "--config", f"{d}/conf"]
            fds = (cls.tcp.fileno(),) if name == "B" else ()
            cls.procs[name] = (subprocess.Popen(activated(argv, fds[0]) if fds else argv, stdout=log,
                                                stderr=subprocess.STDOUT, env=env, pass_fds=fds), log)
        for name in spec:
            r = cls.cli_as(None, name, "status", "--wait", timeout=300)
            if r.returncode != 0:
                with open(os.path.join(cls.tmp, name, "log"), errors="replace") as f:
                    daemon_log = f.read()[-4000:]  # why it stopped: tearDownClass removes the directory
                cls.tearDownClass()
                raise RuntimeError(f"daemon {name} did not load: {r.stderr}\ndaemon log (tail):\n{daemon_log}")

    @classmethod
    def tearDownClass(cls):
        for proc, log in cls.procs.values():
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
        cls.tcp.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def cli_as(cls, user, daemon, *args, timeout=120, stdin=None):
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if user == "nobody" else []
        return subprocess.run(prefix + [CLI, "--socket", os.path.join(cls.tmp, daemon, "grpc.sock"), *args],
                              capture_output=True, timeout=timeout, input=stdin)

    def cli(self, daemon, *args, ok=True):
        r = self.cli_as(None, daemon, *args)
        if ok:
            self.assertEqual(r.returncode, 0, f"{daemon} {args}: {r.stderr.decode()}")
        return r

    def export(self, daemon, sid, *flags):
        path = os.path.join(self.tmp, f"{daemon}-{sid}-{len(flags)}.q3s")
        self.cli(daemon, "sessions", "export", sid, "-o", path, *flags)
        with open(path, "rb") as f:
            return path, f.read()

    def refused(self, daemon, path, *words, flags=()):
        r = self.cli(daemon, "sessions", "import", path, "--id", "refused", *flags, ok=False)
        self.assertNotEqual(r.returncode, 0, f"import of {path} into {daemon} was accepted")
        err = r.stderr.decode()
        for w in words:
            self.assertIn(w, err)
        self.assertEqual(self.cli(daemon, "sessions", "show", "refused", ok=False).returncode, 1, "a refused import left a session")
        return err

    def continuation(self, daemon, sid):
        fwd = json.loads(self.cli(daemon, "forward", "--json", "--top-k", "20", "--session", sid, "--append",
                                  " and the maps").stdout)
        top = [(t["id"], t["logit"], t["logprob"]) for t in fwd["top"]]
        gen = self.cli(daemon, "generate", "--session", sid, "--append", "--greedy", "-n", "16", "--ignore-eos",
                       " Then").stdout
        return top, gen

    def http(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request(method, path, body=body, headers={"Authorization": "Bearer " + self.token, **(headers or {})})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def test_1_bit_identical_continuation(self):
        self.cli("A", "sessions", "create", "--id", "moving", "--max-context", "256")
        self.cli("A", "generate", "--session", "moving", "--greedy", "-n", "12", "--ignore-eos", "The BPF verifier")
        with_kv, data = self.export("A", "moving")
        tokens_only, data_tok = self.export("A", "moving", "--no-kv")
        header, kv = kv_part(data)
        positions = header["session"]["positions"]
        self.assertEqual(positions, len(header["session"]["history"]) - 1, header)  # the last generated token is not fed yet
        self.assertEqual(len(header["model"]["sha256"]), 64)
        self.assertEqual(len(kv), header["kv"]["entries"] * header["kv"]["entry_bytes"])
        self.assertIsNone(kv_part(data_tok)[0]["kv"])
        r = self.cli("B", "sessions", "import", with_kv)
        self.assertEqual(r.stdout.decode().strip(), "moving")
        self.assertIn("KV as exported", r.stderr.decode())
        self.assertIn(f"recomputed from {positions} tokens", self.cli("B", "sessions", "import", tokens_only, "--id", "tok").stderr.decode())
        self.cli("B", "sessions", "import", with_kv, "--id", "rc", "--recompute")
        stayed = self.continuation("A", "moving")
        for sid in ("moving", "tok", "rc"):
            self.assertEqual(self.continuation("B", sid), stayed, sid)
        # The caches themselves, after the continuation: byte for byte.
        self.assertEqual(kv_part(self.export("B", "moving")[1])[1], kv_part(self.export("A", "moving")[1])[1])
        self.assertEqual(kv_part(self.export("B", "tok")[1])[1], kv_part(self.export("A", "moving")[1])[1])

    def test_2_refusals(self):
        self.cli("A", "sessions", "create", "--id", "src", "--max-context", "128")
        self.cli("A", "generate", "--session", "src", "--greedy", "-n", "4", "--ignore-eos", "Packets")
        path, data = self.export("A", "src")
        self.refused("C", path, "carries KV of the bpf backend at q8", "at q24", "recompute")
        self.assertIn("recomputed", self.cli("C", "sessions", "import", path, "--id", "src-c", "--recompute").stderr.decode())
        err = self.refused("D", path, "exported from another model", "model sha256", "same config.json and weights")
        self.assertIn(kv_part(data)[0]["model"]["sha256"][:16], err)
        bad = os.path.join(self.tmp, "bad.q3s")
        cases = [
            (data[:len(data) - 100], ["truncated:", f"of {len(data)} bytes (100 bytes missing)"]),
            (data[:20], ["truncated:"]),
            (data[:-40] + bytes([data[-40] ^ 1]) + data[-39:], ["checksum mismatch"]),  # one KV bit
            (data[:30] + bytes([data[30] ^ 4]) + data[31:], ["checksum mismatch"]),  # one header bit
            (data[:8] + struct.pack("<I", 2) + data[12:], ["format version 2", "reads version 1"]),
            (b"hello\n", ["not a qwen3-bpfd session export"]),
            (data + b"x", ["1 byte of trailing data"]),
        ]
        for content, words in cases:
            with open(bad, "wb") as f:
                f.write(content)
            self.refused("A", bad, "session export:", *words)

    def test_3_ownership_and_http(self):
        # A TCP client's session (uid 4294967294) through the HTTP endpoints.
        status, body = self.http("POST", "/v1/sessions", b'{"max_context": 128}', {"X-Session-Id": "web"})
        self.assertEqual(status, 201, body)
        self.assertEqual(json.loads(body)["owner_uid"], TCP_UID)
        status, body = self.http("POST", "/v1/completions", json.dumps({"prompt": "The kernel", "max_tokens": 4}).encode(),
                                 {"X-Session-Id": "web"})
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["session_id"], "web")
        status, exported = self.http("GET", "/v1/sessions/web/export")
        self.assertEqual(status, 200)
        # Root imports it elsewhere: the owner is kept.
        path = os.path.join(self.tmp, "web.q3s")
        with open(path, "wb") as f:
            f.write(exported)
        self.cli("A", "sessions", "import", path)
        show = json.loads(self.cli("A", "sessions", "show", "web", "--json").stdout)
        self.assertEqual(show["session"]["owner_uid"], TCP_UID)
        # A TCP client may import its own session (here, back under another id) ...
        status, body = self.http("POST", "/v1/sessions/import?session_id=web2", exported)
        self.assertEqual(status, 201, body)
        self.assertEqual(json.loads(body)["owner_uid"], TCP_UID)
        self.assertTrue(json.loads(body)["kv_imported"])
        # ... but not root's, and neither may nobody.
        self.cli("A", "sessions", "create", "--id", "roots")
        roots, _ = self.export("A", "roots")
        with open(roots, "rb") as f:
            status, body = self.http("POST", "/v1/sessions/import", f.read())
        self.assertEqual(status, 403, body)
        self.assertIn("belongs to uid 0; only root may import a session for another uid", json.loads(body)["error"]["message"])
        r = self.cli_as("nobody", "B", "sessions", "import", "-", stdin=exported)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(f"belongs to uid {TCP_UID}; only root may import", r.stderr.decode())
        self.assertEqual(self.http("DELETE", "/v1/sessions/web2")[0], 200)
        self.assertEqual(self.http("GET", "/v1/sessions/web2")[0], 404)

    def test_4_drain(self):
        for sid in ("d-1", "d-2"):
            self.cli("B", "sessions", "create", "--id", sid, "--max-context", "128")
            self.cli("B", "generate", "--session", sid, "--greedy", "-n", "3", "--ignore-eos", "Maps")
        before = self.cli("B", "sessions", "list", "--json").stdout
        ids = {s["session_id"] for s in json.loads(before)["sessions"] if not s["session_id"].startswith("prompt-cache-")}
        r = self.cli("B", "drain", "--to", os.path.join(self.tmp, "C", "grpc.sock"))  # C: another precision, KV recomputed
        out = r.stdout.decode()
        self.assertIn(f"drained: {len(ids)} moved, 0 failed", out)
        left = json.loads(self.cli("B", "sessions", "list", "--json").stdout).get("sessions", [])
        self.assertEqual([s for s in left if not s["session_id"].startswith("prompt-cache-")], [])
        there = {s["session_id"] for s in json.loads(self.cli("C", "sessions", "list", "--json").stdout)["sessions"]}
        self.assertTrue(ids <= there, (ids, there))


if __name__ == "__main__":
    unittest.main(verbosity=2)
