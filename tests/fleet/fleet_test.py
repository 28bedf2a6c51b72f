#!/usr/bin/python3
"""A fleet of three qwen3-bpfd daemons behind HAProxy (scripts/fleet.sh up 3),
driven by the official OpenAI SDK (fleet_client.mjs).

- 30 sessions, each created with an X-Session-Id header and continued for two
  chat turns: every request of a session is served by the daemon that created
  it (X-Qwen3-Backend), the second turn reuses the first's KV (cached_tokens),
  each daemon lists exactly the sessions the gateway sent it, and each
  daemon's /metrics (through the gateway's /backend/<name>/metrics) counts
  exactly its sessions and the cached tokens its answers reported.
- Requests without a session are balanced and all succeed.
- The daemon with the fewest sessions is drained through the gateway (out of
  the gateway with `fleet.sh maint`, then `qwen3-bpf drain --to URL`): each of
  its sessions moves with its KV to the daemon its id now hashes to.
- Another daemon is killed: requests without a session keep succeeding; a
  session of the dead daemon gets a 404 naming it (never another daemon's
  answer), the other sessions (the drained ones included) continue where they are.

Environment (set by CMake): QWEN3_BPFD, QWEN3_CLI, QWEN3_TEST_MODEL (the shipped
model, unpacked), QWEN3_OPENAI_DIR, QWEN3_SOURCE_DIR.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

SRC = os.environ.get("QWEN3_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
SESSIONS = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, token):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read().decode()


def metric(text, name, labels=""):
    m = re.search(r"^" + re.escape(name + labels) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


class FleetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="qwen3-fleet-")
        cls.env = dict(os.environ, QWEN3_FLEET_DIR=os.path.join(cls.tmp, "fleet"),
                       QWEN3_FLEET_PORT=str(free_port()), QWEN3_FLEET_BACKEND_PORT=str(free_port()),
                       QWEN3_MODEL=os.environ["QWEN3_TEST_MODEL"])
        for k in ("LISTEN_FDS", "LISTEN_PID", "NOTIFY_SOCKET"):
            cls.env.pop(k, None)
        cls.fleet = os.path.join(SRC, "scripts", "fleet.sh")
        t0 = time.time()
        up = subprocess.run([cls.fleet, "up", "3"], env=cls.env, capture_output=True, text=True, timeout=600)
        if up.returncode != 0:
            cls.tearDownClass()
            raise RuntimeError("fleet.sh up 3 failed:\n" + up.stdout + up.stderr)
        cls.up_seconds = time.time() - t0
        cls.vars = dict(line.split("=", 1) for line in up.stdout.split() if "=" in line)
        cls.url, cls.token = cls.vars["QWEN3_FLEET_URL"], cls.vars["QWEN3_FLEET_TOKEN"]
        cls.dir = cls.vars["QWEN3_FLEET_DIR"]
        with open(os.path.join(cls.dir, "backend-token")) as f:
            cls.backend_token = f.read().strip()
        cls.backend_port = cls.env["QWEN3_FLEET_BACKEND_PORT"]

    @classmethod
    def tearDownClass(cls):
        subprocess.run([cls.fleet, "down"], env=cls.env, capture_output=True, timeout=120)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def client(self, *args):
        r = subprocess.run(["node", os.path.join(HERE, "fleet_client.mjs"), args[0], self.url, self.token, *args[1:]],
                           env=self.env, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def backend_metrics(self, name):
        return get(f"{self.url}/backend/{name}/metrics", self.token)

    def direct_sessions(self, i):
        """The sessions daemon d<i> lists, asked directly with the backends' token."""
        body = get(f"http://127.0.0.{i + 1}:{self.backend_port}/v1/sessions", self.backend_token)
        return {s["id"] for s in json.loads(body)["data"] if not s["id"].startswith("prompt-cache-")}

    def test_fleet(self):
        names = ["d1", "d2", "d3"]
        self.assertTrue(self.url.startswith("http://127.0.0.1:"), self.url)
        before = {n: self.backend_metrics(n) for n in names}
        out = self.client("sessions", str(SESSIONS))

        # Sticky: every request of a session is served by the daemon that created it.
        by_backend = {n: set() for n in names}
        cached = {n: 0 for n in names}
        for s in out["sessions"]:
            self.assertIn(s["created_on"], names, s)
            by_backend[s["created_on"]].add(s["id"])
            self.assertEqual(s["owner"], 4294967294, s)  # TCP clients' uid, as with gRPC's ownership rules
            for t in s["turns"]:
                self.assertEqual(t["backend"], s["created_on"], s)
                cached[t["backend"]] += t["cached"]
            # The second turn reuses the first's KV in the session (up to where the chat
            # template renders the earlier assistant turn differently: its empty think block).
            self.assertGreater(s["turns"][1]["cached"], 0, s)
        for t in out["sessionless"]:
            self.assertIn(t["backend"], names, t)
            self.assertTrue(t["text"] is not None and t["prompt"] > 0, t)
            cached[t["backend"]] += t["cached"]
        self.assertGreaterEqual(sum(1 for n in names if by_backend[n]), 2, by_backend)
        self.assertGreaterEqual(len({t["backend"] for t in out["sessionless"]}), 2, out["sessionless"])

        # Each daemon holds exactly the sessions the gateway sent it, and its counters agree.
        for i, n in enumerate(names, start=1):
            self.assertEqual(self.direct_sessions(i), by_backend[n], n)
            after = self.backend_metrics(n)
            self.assertIn('qwen3_bpfd_model_loaded 1', after)
            self.assertEqual(metric(after, "qwen3_bpfd_evicted_sessions_total"), 0, n)
            named = metric(after, "qwen3_bpfd_sessions", '{kind="named"}')
            prompt_caches = len([1 for line in get(f"http://127.0.0.{i + 1}:{self.backend_port}/v1/sessions",
                                                   self.backend_token).split('"id":') if line.startswith('"prompt-cache-')])
            self.assertEqual(named - prompt_caches, len(by_backend[n]), n)
            self.assertEqual(metric(after, "qwen3_bpfd_cached_tokens_total") -
                             metric(before[n], "qwen3_bpfd_cached_tokens_total"), cached[n], n)

        # Drain the daemon holding the fewest sessions through the gateway (docs/deploy.md):
        # out of the gateway, then each session to the daemon its id now hashes to.
        drained = min((n for n in names if by_backend[n]), key=lambda n: len(by_backend[n]))
        subprocess.run([self.fleet, "maint", drained[1:]], env=self.env, check=True, capture_output=True, timeout=30)
        r = subprocess.run([os.environ["QWEN3_CLI"], "--socket", os.path.join(self.dir, drained, "grpc.sock"), "drain",
                            "--to", self.url, "--token-file", os.path.join(self.dir, "fleet-token")],
                           env=self.env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"drained: {len(by_backend[drained])} moved, 0 failed", r.stdout)
        self.assertEqual(r.stdout.count("KV as exported"), len(by_backend[drained]), r.stdout)
        home = {s["id"]: s["created_on"] for s in out["sessions"]}
        holders = {n: self.direct_sessions(i) for i, n in enumerate(names, start=1)}
        self.assertEqual(holders[drained], set())
        for sid in by_backend[drained]:
            now = [n for n in names if sid in holders[n]]
            self.assertEqual(len(now), 1, (sid, holders))
            home[sid] = now[0]
        survivors = [n for n in names if n != drained]

        # Kill the (remaining) daemon holding the most sessions.
        victim = max(survivors, key=lambda n: len(holders[n]))
        with open(os.path.join(self.dir, victim, "pid")) as f:
            pid = int(f.read())
        os.kill(pid, signal.SIGKILL)
        ids = [s["id"] for s in out["sessions"]]
        after = self.client("after", *ids)
        for t in after["sessionless"]:
            self.assertIn(t["backend"], survivors, t)
            self.assertNotEqual(t["backend"], victim, t)
        for s in after["sessions"]:
            if home[s["id"]] == victim:
                self.assertFalse(s["ok"], s)  # never an answer from a daemon that does not hold it
                self.assertEqual(s["status"], 404, s)
                self.assertIn(f"unknown session '{s['id']}'", s["message"], s)
            else:
                self.assertTrue(s["ok"], s)
                self.assertEqual(s["backend"], home[s["id"]], s)
        print(f"fleet: up in {self.up_seconds:.1f} s; sessions per daemon "
              f"{ {n: len(v) for n, v in by_backend.items()} }; drained {drained}, killed {victim}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
