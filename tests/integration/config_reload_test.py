#!/usr/bin/python3
"""Every key of the config table round-trips through the conf file, SIGHUP and
status: one daemon (the tiny model, a scratch dir), its file rewritten with
every key changed, one SIGHUP. Keys marked [reload] must be logged as applied
(and show in GetStatus where it reports them); keys marked [restart] must be
logged as needing a restart and listed by GetStatus.restart_needed and
`qwen3-bpf status` with the value in force and the one on disk. A second
SIGHUP with the first file clears the list.

The keys, defaults and markings come from `qwen3-bpfd --print-config`, so a
key added to the table is covered without touching this test.

Environment (set by CMake): QWEN3_BPFD, QWEN3_CLI, QWEN3_TEST_MODEL, QWEN3_PROTO_DIR.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_harness as dt  # noqa: E402  (stubs and start_daemon)

CLI = os.environ.get("QWEN3_CLI", "")


def table_keys():
    """{key: (default, allowed, 'reload'|'restart')} from the daemon's commented conf file."""
    text = subprocess.run([dt.DAEMON, "--print-config"], capture_output=True, text=True, check=True).stdout
    keys, pending = {}, None
    for line in text.splitlines():
        m = re.match(r"^# Values: (.*)\. \[(reload|restart)\]$", line)
        if m:
            pending = m.groups()
            continue
        m = re.match(r"^#(\w+) =(?: (.*))?$", line)
        if m and pending:
            keys[m.group(1)] = (m.group(2) or "", pending[0], pending[1])
            pending = None
    return keys


def other_value(key, base, allowed, tmp):
    """A valid value other than `base`, chosen from the key's allowed values."""
    special = {"log_level": "debug", "http_listen": "127.0.0.1:1", "udp_endpoint": "lo:7071"}
    if key in special:
        return special[key]
    m = re.fullmatch(r"(-?\d+)\.\.(\d+)", allowed)
    if m:
        return str(int(base) + 1 if int(base) < int(m.group(2)) else int(base) - 1)
    if "|" in allowed:
        return next(w for w in allowed.split("|") if w != base)
    if allowed.startswith("absolute path"):
        return os.path.join(tmp, "other-" + key)
    return "other-" + key


class ConfigReloadTest(unittest.TestCase):
    def setUp(self):
        if not (dt.DAEMON and dt.MODEL and dt.PROTO_DIR and CLI):
            raise RuntimeError("QWEN3_BPFD, QWEN3_CLI, QWEN3_TEST_MODEL and QWEN3_PROTO_DIR must be set")
        self.tmp = tempfile.mkdtemp(prefix="qwen3-config-reload-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        dt.generate_stubs(os.path.join(self.tmp, "stubs"))
        self.sock = os.path.join(self.tmp, "s.sock")
        self.conf = os.path.join(self.tmp, "c.conf")
        self.log = os.path.join(self.tmp, "daemon.log")

    def write_conf(self, values):
        with open(self.conf, "w") as f:
            f.write("".join(f"{k} = {v}\n" for k, v in values.items()))

    def log_text(self):
        with open(self.log) as f:
            return f.read()

    def sighup_and_wait(self, proc, needle):
        before = self.log_text().count(needle)
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 15
        while self.log_text().count(needle) <= before:
            self.assertLess(time.time(), deadline, f"no '{needle}' after SIGHUP:\n{self.log_text()}")
            time.sleep(0.05)

    def cli_status(self, *extra):
        r = subprocess.run([CLI, "--socket", self.sock, "status", *extra], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_every_key_round_trips_through_file_sighup_and_status(self):
        keys = table_keys()
        self.assertGreaterEqual(len(keys), 28, "qwen3-bpfd --print-config lists too few keys")
        self.assertTrue({"kv_bits", "prefill_chunk", "persist_sessions"} <= keys.keys())
        base = {k: default for k, (default, _, _) in keys.items()}
        base.update(model_dir=dt.MODEL, socket_path=self.sock, state_dir=self.tmp, log_level="info",
                    default_max_new_tokens="4", kv_budget_mib="4", max_sessions="4")
        changed = {k: other_value(k, base[k], allowed, self.tmp) for k, (_, allowed, _) in keys.items()}
        changed["http_token_file"] = os.path.join(self.tmp, "token")  # http_listen needs one
        live = {k for k, (_, _, mark) in keys.items() if mark == "reload"}
        self.write_conf(base)
        proc = dt.start_daemon(self.conf, self.log, self.sock, 120)
        self.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait()))
        stub = dt.pb_grpc.Qwen3BpfStub(dt.grpc.insecure_channel("unix:" + self.sock))

        self.write_conf(changed)
        self.sighup_and_wait(proc, "reload: max_sessions")
        log = self.log_text()
        self.assertNotIn("configuration unchanged", log)
        for k in keys:
            line = f"reload: {k} {base[k] or chr(34) * 2} -> {changed[k]}"
            self.assertIn(line, log, k)
            restart_line = line + " needs a restart"
            if k in live:
                self.assertNotIn(restart_line, log, f"{k} is marked [reload] but was not applied")
            else:
                self.assertIn(restart_line, log, f"{k} is marked [restart] but its warning is missing")

        status = stub.GetStatus(dt.pb.GetStatusRequest(), timeout=10)
        pending = {r.key: (r.value_in_force, r.value_on_disk) for r in status.restart_needed}
        self.assertEqual(pending, {k: (base[k], changed[k]) for k in keys if k not in live})
        # The applied ones that GetStatus reports, and one that a request shows.
        self.assertEqual(status.sessions.max_sessions, int(changed["max_sessions"]))
        self.assertEqual(status.sessions.ttl_seconds, int(changed["session_ttl_seconds"]))
        self.assertEqual(status.sessions.default_context, int(changed["default_context"]))
        self.assertEqual(status.memory.kv_budget_bytes, int(changed["kv_budget_mib"]) << 20)
        self.assertEqual(status.socket_path, self.sock)  # restart-only: still the old one
        tokens = [m.token_id for m in stub.Generate(dt.pb.GenerateRequest(
            prompt="Hello", stopping=dt.pb.StoppingCriteria(ignore_eos=True),
            sampling=dt.pb.SamplingParams(temperature=0)), timeout=60) if m.token_id >= 0]
        self.assertEqual(len(tokens), int(changed["default_max_new_tokens"]))

        text = self.cli_status()
        self.assertIn("restart needed", text)
        self.assertIn(f"kv_bits: {base['kv_bits']} in force, {changed['kv_bits']} on disk", text)
        self.assertIn(f"persist_sessions: {base['persist_sessions']} in force, {changed['persist_sessions']} on disk",
                      text)
        as_json = json.loads(self.cli_status("--json"))
        self.assertEqual({r["key"]: (r["value_in_force"], r["value_on_disk"]) for r in as_json["restart_needed"]},
                         pending)

        # The file changed back: the applied keys return, nothing is pending.
        self.write_conf(base)
        self.sighup_and_wait(proc, f"reload: max_sessions {changed['max_sessions']} -> {base['max_sessions']}")
        status = stub.GetStatus(dt.pb.GetStatusRequest(), timeout=10)
        self.assertEqual(list(status.restart_needed), [])
        self.assertEqual(status.sessions.max_sessions, int(base["max_sessions"]))
        self.assertNotIn("restart needed", self.cli_status())
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(30), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
