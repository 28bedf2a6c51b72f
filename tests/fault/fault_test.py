#!/usr/bin/python3
"""The fault test of qwen3-bpfd (issue 14), bounded to 2 minutes, Unix socket only.

16 client threads stream generations at once, on sessions of their own and on
ephemeral caches, while other clients are SIGKILLed mid-stream, sessions are
created, cancelled and deleted, and the daemon itself is SIGKILLed once and
restarted. Checked:
  - every session whose last request completed is restored exactly (history
    and positions) after the kill -9; one with a request in flight is restored
    as it was before that request, or, when the daemon finished it but the
    client never saw the end, as after it;
  - no BPF map or program outlives the daemons (ids counted before and after,
    and every id the daemons held is gone);
  - memory stays bounded: the KV bytes never exceed the budget and come back
    to zero, the daemon's maps return to their number at READY, and its RSS
    does not grow over the second run;
  - a report of the requests served, failed and recovered.

Environment (set by CMake): QWEN3_BPFD, QWEN3_TEST_MODEL, QWEN3_PROTO_DIR,
QWEN3_BACKEND.
"""

import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import daemon_harness as it  # noqa: E402  (stubs, BPF map helpers)

DAEMON = os.environ.get("QWEN3_BPFD", "")
MODEL = os.environ.get("QWEN3_TEST_MODEL", "")
BACKEND = os.environ.get("QWEN3_BACKEND", "bpf")
WORKERS = 16
BOUND_S = 120          # the whole test, start to last check
RUN1_S = 30            # load before the kill -9
RUN2_S = 25            # load after the restart
KV_BUDGET_MIB = 64
SESSION_CONTEXT = 192
RSS_GROWTH_BOUND = 48 << 20  # second run: end vs. its first seconds (a leak per request would exceed it)


def bpf_objects():
    """Every BPF map and program in the kernel: {("map"|"prog", id): (name, map_ids)}."""
    out = {}
    for kind in ("map", "prog"):
        listed = json.loads(subprocess.run(["bpftool", kind, "list", "-j"], capture_output=True, text=True,
                                           check=True).stdout or "[]")
        for o in listed:
            out[(kind, o["id"])] = (o.get("name", ""), tuple(o.get("map_ids", ())))
    return out


def held_by(pid):
    """(kind, id) of the BPF maps and programs process `pid` holds open."""
    held = set()
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fdinfo)
    except OSError:
        return held
    for fd in fds:
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    if line.startswith("map_id:"):
                        held.add(("map", int(line.split()[1])))
                    elif line.startswith("prog_id:"):
                        held.add(("prog", int(line.split()[1])))
        except OSError:
            pass  # closed meanwhile
    return held


def held_by_anyone():
    """BPF objects some live process holds, and the maps those programs use."""
    held = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            held |= held_by(p)
    return held


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {k: 0 for k in ("served", "failed", "recovered", "cancelled", "clients_killed", "created",
                                 "deleted", "ephemeral")}
        self.unexpected = []

    def add(self, key, k=1):
        with self.lock:
            self.n[key] += k

    def odd(self, what):
        with self.lock:
            self.unexpected.append(what)


class FaultTest(unittest.TestCase):
    def setUp(self):
        if not (DAEMON and MODEL and it.PROTO_DIR):
            raise RuntimeError("QWEN3_BPFD, QWEN3_TEST_MODEL and QWEN3_PROTO_DIR must be set")
        self.t0 = time.monotonic()
        self.tmp = tempfile.mkdtemp(prefix="qwen3-bpfd-fault-")
        os.chmod(self.tmp, 0o755)
        self.stubs = os.path.join(self.tmp, "stubs")
        it.generate_stubs(self.stubs)
        self.pb, self.pb_grpc = it.pb, it.pb_grpc
        self.socket_path = os.path.join(self.tmp, "fault.sock")
        self.config_path = os.path.join(self.tmp, "fault.conf")
        self.log_path = os.path.join(self.tmp, "daemon.log")
        with open(self.config_path, "w") as f:
            f.write(f"model_dir = {MODEL}\nbackend = {BACKEND}\nsocket_path = {self.socket_path}\n"
                    f"socket_group = nogroup\nstate_dir = {self.tmp}/state\nmax_sessions = 96\n"
                    f"max_sessions_per_uid = 96\nkv_budget_mib_per_uid = {KV_BUDGET_MIB}\n"  # all workers are root
                    f"kv_budget_mib = {KV_BUDGET_MIB}\nsession_ttl_seconds = 600\ndefault_context = 256\n"
                    f"default_max_new_tokens = 16\nprefill_chunk = 16\nlog_level = info\n")
        self.proc = None
        self.stats = Stats()
        # sid -> its last calls and what they returned: printed when a restore check fails
        self.trail = collections.defaultdict(lambda: collections.deque(maxlen=8))
        self.up = threading.Event()      # the daemon serves; workers wait on it
        self.ending = threading.Event()  # workers stop
        self.rss = []                    # (daemon run, seconds, bytes)
        self.kv_peak = 0
        self.ever_held = set()
        self.names = set()               # names of the BPF objects the daemons held

    def tearDown(self):
        self.ending.set()
        self.up.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stub(self):
        return self.pb_grpc.Qwen3BpfStub(grpc.insecure_channel("unix:" + self.socket_path))

    def start(self):
        self.proc = it.start_daemon(self.config_path, self.log_path, self.socket_path, 45)
        return self.stub()

    # ------------------------------------------------------------ the load

    def worker(self, w, sessions):
        """One client: its own channel, its own sessions (id -> last completed history_tokens)."""
        pb = self.pb
        rng = random.Random(w)
        stub = self.stub()
        pending = None  # a request that failed at the kill, retried once the daemon is back
        n = 0
        while not self.ending.is_set():
            self.up.wait()
            if self.ending.is_set():
                break
            try:
                if pending is not None:
                    req, sid = pending
                    self.finish_stream(stub, req, sid, sessions)
                    pending = None
                    self.stats.add("recovered")
                    continue
                mine = [s for s, v in sessions.items() if v is not None]
                r = rng.random()
                if len(mine) < 2 and r < 0.5:
                    n += 1
                    sid = f"w{w}-{n}"
                    sessions[sid] = "creating"
                    stub.CreateSession(pb.CreateSessionRequest(max_context=SESSION_CONTEXT, session_id=sid),
                                       timeout=30)
                    sessions[sid] = {"history": 0, "inflight": None}
                    self.stats.add("created")
                elif mine and r < 0.12:
                    sid = rng.choice(mine)
                    sessions[sid] = "deleting"
                    stub.DeleteSession(pb.DeleteSessionRequest(session_id=sid), timeout=30)
                    del sessions[sid]
                    self.stats.add("deleted")
                elif mine and r < 0.85:
                    sid = rng.choice(mine)
                    state = sessions[sid]
                    if not isinstance(state, dict):
                        continue
                    if state["history"] + 40 > SESSION_CONTEXT:  # full: start it again
                        sessions[sid] = "deleting"
                        stub.DeleteSession(pb.DeleteSessionRequest(session_id=sid), timeout=30)
                        del sessions[sid]
                        self.stats.add("deleted")
                        continue
                    req = pb.GenerateRequest(
                        token_ids=[rng.randrange(10, 5000) for _ in range(rng.randrange(1, 12))], session_id=sid,
                        history_mode=pb.HISTORY_MODE_APPEND,
                        stopping=pb.StoppingCriteria(max_new_tokens=rng.randrange(2, 14), ignore_eos=True))
                    state["inflight"] = len(req.token_ids) + req.stopping.max_new_tokens
                    pending = (req, sid)
                    self.trail[sid].append(f"{time.monotonic():.3f} generate from {state['history']}: "
                                           f"{len(req.token_ids)} + {req.stopping.max_new_tokens}")
                    if rng.random() < 0.1:
                        # A cancelled stream commits what it had (the prompt and the tokens so far):
                        # killed before the worker learns it, any such length is a correct restore.
                        state["cancel_prompt"] = len(req.token_ids)
                        self.cancel_stream(stub, req, sid, sessions)
                    else:
                        self.finish_stream(stub, req, sid, sessions)
                    pending = None
                else:
                    pending = (pb.GenerateRequest(prompt="an ephemeral one", stopping=pb.StoppingCriteria(
                        max_new_tokens=rng.randrange(2, 20), ignore_eos=True)), None)
                    self.finish_stream(stub, pending[0], None, sessions)
                    self.stats.add("ephemeral")
                    pending = None
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or self.up.is_set() and self.proc.poll() is None:
                    self.stats.odd(f"worker {w}: {e.code().name}: {e.details()}")
                self.stats.add("failed")
                for sid, v in list(sessions.items()):
                    if v in ("creating", "deleting"):
                        sessions[sid] = None  # the kill came mid-call: it may or may not have happened
                time.sleep(0.2)
                stub = self.stub()

    def finish_stream(self, stub, req, sid, sessions):
        msgs = list(stub.Generate(req, timeout=60))
        last = msgs[-1]
        if last.finish_reason != self.pb.FINISH_REASON_LENGTH or last.usage.completion_tokens != req.stopping.max_new_tokens:
            self.stats.odd(f"{sid}: finished {last.finish_reason} after {last.usage.completion_tokens} tokens")
        if sid is not None:
            # APPEND: the effective prompt is the history plus the new tokens.
            sessions[sid] = {"history": last.usage.prompt_tokens + last.usage.completion_tokens, "inflight": None}
            self.trail[sid].append(f"{time.monotonic():.3f} finished: {last.usage.prompt_tokens} + "
                                   f"{last.usage.completion_tokens}, reason {last.finish_reason}")
        self.stats.add("served")

    def cancel_stream(self, stub, req, sid, sessions):
        call = stub.Generate(req, timeout=60)
        next(call)
        call.cancel()
        self.stats.add("cancelled")
        self.trail[sid].append(f"{time.monotonic():.3f} cancelled after its first message")
        # What it holds now is as the daemon committed it: asked once it is free again.
        deadline = time.monotonic() + 20
        while True:
            s = stub.GetSession(self.pb.GetSessionRequest(session_id=sid), timeout=10).session
            if not s.busy:
                sessions[sid] = {"history": s.history_tokens, "inflight": None}
                self.trail[sid].append(f"{time.monotonic():.3f} after the cancel: {s.history_tokens} tokens")
                return
            if time.monotonic() > deadline:
                self.stats.odd(f"{sid} still busy 20 s after its stream was cancelled")
                sessions[sid] = None
                return
            time.sleep(0.02)

    def client_killer(self):
        """Clients in their own processes, SIGKILLed once their stream is under way."""
        script = f"""
import sys, grpc
sys.path.insert(0, {self.stubs!r})
from qwen3bpf.v1 import qwen3bpf_pb2 as pb, qwen3bpf_pb2_grpc as g
stub = g.Qwen3BpfStub(grpc.insecure_channel('unix:{self.socket_path}'))
for m in stub.Generate(pb.GenerateRequest(prompt='killed mid-stream', stopping=pb.StoppingCriteria(
        max_new_tokens=200, ignore_eos=True)), timeout=60):
    print('token', flush=True)
"""
        while not self.ending.is_set():
            self.up.wait()
            if self.ending.is_set():
                return
            child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
            got = child.stdout.readline()  # its first token (or nothing, if the daemon died meanwhile)
            child.kill()
            child.wait()
            child.stdout.close()
            if got:
                self.stats.add("clients_killed")
            time.sleep(0.3)

    def sampler(self, run):
        """The daemon's RSS, its BPF objects and the KV bytes, twice a second."""
        stub = self.stub()
        t = time.monotonic()
        proc = self.proc
        rounds = 0
        while not self.ending.is_set() and proc.poll() is None:
            self.rss.append((run, time.monotonic() - t, rss_bytes(proc.pid)))
            held = held_by(proc.pid)
            self.ever_held |= held
            if rounds % 4 == 0:
                objects = bpf_objects()
                self.names |= {objects[o][0] for o in held if o in objects}
            rounds += 1
            try:
                mem = stub.GetStatus(self.pb.GetStatusRequest(), timeout=5).memory
                self.kv_peak = max(self.kv_peak, mem.kv_bytes)
                if mem.kv_bytes > mem.kv_budget_bytes:
                    self.stats.odd(f"KV {mem.kv_bytes} bytes over the budget {mem.kv_budget_bytes}")
            except grpc.RpcError:
                pass
            time.sleep(0.5)

    # ------------------------------------------------------------ the test

    def expected_alternatives(self, sessions):
        """sid -> the history lengths a correct restore may show."""
        out = {}
        for sid, v in sessions.items():
            if isinstance(v, dict):
                out[sid] = {v["history"]} | ({v["history"] + v["inflight"]} if v["inflight"] else set())
                if v["inflight"] and v.get("cancel_prompt") is not None:
                    out[sid] |= set(range(v["history"] + v["cancel_prompt"], v["history"] + v["inflight"] + 1))
        return out

    def wait_restored(self, stub, expected, ready_at):
        """The sessions listed once the saved ones are recreated and none is busy
        (or 30 s passed), and how long after READY they were first listed."""
        pb = self.pb
        deadline = ready_at + 30
        listed_after = None
        while True:
            listing = {s.session_id: s for s in stub.ListSessions(pb.ListSessionsRequest(), timeout=10).sessions}
            if listed_after is None and (listing or not expected):
                listed_after = time.monotonic() - ready_at
            if listed_after is not None and not any(s.busy for s in listing.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertIsNotNone(listed_after, "the saved sessions were not recreated within 30 s of READY")
        self.assertLess(listed_after, 2.0, "the saved sessions were recreated only long after READY")
        return listing, listed_after

    def check_restored(self, expected, listing, killed_at, killed_log):
        """Every session with a completed request came back with one of the
        histories it may have; returns their history lengths."""
        restored = {}
        for sid, allowed in expected.items():
            self.assertIn(sid, listing, f"session {sid} (a completed request) was not restored:\n" + self.log())
            s = listing[sid]
            self.assertFalse(s.busy, f"{sid} still restoring after 30 s")
            self.assertIn(s.history_tokens, allowed,
                          f"{sid} restored with {s.history_tokens} tokens; killed at {killed_at:.3f}; its calls:\n  " +
                          "\n  ".join(self.trail[sid]) + "\nthe killed daemon's log (tail):\n" +
                          "\n".join(l for l in killed_log.splitlines()[-60:]))
            self.assertEqual(s.positions, max(s.history_tokens - 1, 0) if s.history_tokens else 0, sid)
            restored[sid] = s.history_tokens
        return restored

    def leftovers(self, before):
        """The kernel's BPF objects now, those the daemons held still there, and
        new ones of their names nobody holds (waiting up to 15 s for both to go)."""
        deadline = time.monotonic() + 15
        while True:
            after = bpf_objects()
            left = {o for o in self.ever_held if o in after}
            new = set(after) - set(before)
            unheld = {o for o in new - held_by_anyone() if after[o][0] in self.names}
            unheld_maps_of_progs = {("map", m) for o in after if o[0] == "prog" and o not in unheld
                                    for m in after[o][1]}
            unheld -= unheld_maps_of_progs
            if not left and not unheld:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return after, left, unheld

    def test_kill_9_under_load(self):
        pb = self.pb
        before = bpf_objects()
        stub = self.start()
        at_ready = held_by(self.proc.pid)
        self.ever_held |= at_ready
        objects = bpf_objects()
        self.names |= {objects[o][0] for o in at_ready if o in objects}
        per_worker = [dict() for _ in range(WORKERS)]
        threads = [threading.Thread(target=self.worker, args=(w, per_worker[w]), daemon=True) for w in range(WORKERS)]
        threads.append(threading.Thread(target=self.client_killer, daemon=True))
        sampler = threading.Thread(target=self.sampler, args=(1,), daemon=True)
        self.up.set()
        for t in threads + [sampler]:
            t.start()
        time.sleep(RUN1_S)

        # The kill -9, in the middle of the load; workers hold still until the restore is checked.
        self.up.clear()
        killed_at = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)
        self.assertEqual(self.proc.wait(30), -signal.SIGKILL)
        killed_log = self.log()
        sampler.join()
        first = self.proc.pid
        time.sleep(1.0)  # requests in flight fail and their workers note it
        expected = {}
        for sessions in per_worker:
            expected.update(self.expected_alternatives(sessions))
        served_at_kill = self.stats.n["served"]
        stub = self.start()
        at_ready2 = held_by(self.proc.pid)
        self.ever_held |= at_ready2
        # The saved sessions are recreated (busy) a moment after READY, not
        # before it (a defect outside this test's reach, see daemon_crash_test.py
        # test_c_saved_sessions_exist_from_the_first_ready_answer): wait for
        # them to be listed, then for their KV to be recomputed.
        ready_at = time.monotonic()
        listing, listed_after = self.wait_restored(stub, expected, ready_at)
        restore_s = time.monotonic() - ready_at
        restored = self.check_restored(expected, listing, killed_at, killed_log)
        # Workers go on from what was restored.
        for sessions in per_worker:
            for sid in list(sessions):
                if sid in restored:
                    sessions[sid] = {"history": restored[sid], "inflight": None}
                elif sid in listing:
                    sessions[sid] = None  # created or deleted at the kill: left alone
                else:
                    del sessions[sid]
        sampler = threading.Thread(target=self.sampler, args=(2,), daemon=True)
        sampler.start()
        self.up.set()
        time.sleep(RUN2_S)
        self.ending.set()
        for t in threads:
            t.join(60)
            self.assertFalse(t.is_alive(), "a client thread hung")
        sampler.join()

        # Every session deleted: the KV memory and the daemon's maps are as at READY.
        for s in stub.ListSessions(pb.ListSessionsRequest(), timeout=10).sessions:
            stub.DeleteSession(pb.DeleteSessionRequest(session_id=s.session_id), timeout=10)
        deadline = time.monotonic() + 20
        while stub.GetStatus(pb.GetStatusRequest(), timeout=5).memory.kv_bytes != 0:
            self.assertLess(time.monotonic(), deadline, "KV memory not freed after every session was deleted")
            time.sleep(0.05)
        # Both daemons run the same model and configuration: with no session
        # left, the second holds as many maps as the first did at READY (when
        # it had none; the second restored sessions at READY).
        maps_ready = len({o for o in at_ready if o[0] == "map"})
        maps_end = len({o for o in held_by(self.proc.pid) if o[0] == "map"})
        run2 = [(t, b) for r, t, b in self.rss if r == 2]
        early = max(b for t, b in run2 if t < 6)
        late = max(b for t, b in run2 if t >= RUN2_S - 6)
        self.ever_held |= held_by(self.proc.pid)

        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(30), 0, self.log())
        # Nothing the daemons held, nor anything new of the names theirs had
        # (objects the sampling missed), is left in the kernel.
        after, left, unheld = self.leftovers(before)
        elapsed = time.monotonic() - self.t0
        n = self.stats.n
        report = (f"\nfault test report ({elapsed:.0f} s, {WORKERS} client threads, backend {BACKEND}):\n"
                  f"  requests served {n['served']} ({served_at_kill} before the kill -9), failed {n['failed']}, "
                  f"recovered {n['recovered']} (retried after the restart and completed)\n"
                  f"  streams cancelled {n['cancelled']}, clients killed mid-stream {n['clients_killed']}, "
                  f"ephemeral {n['ephemeral']}\n"
                  f"  sessions created {n['created']}, deleted {n['deleted']}, restored after the kill "
                  f"{len(restored)} of {len(expected)} with a completed request (listed {listed_after:.2f} s after "
                  f"READY, recomputed after {restore_s:.2f} s)\n"
                  f"  BPF objects in the kernel: {len(before)} before, {len(after)} after; held by the daemons "
                  f"{len(self.ever_held)}, left {len(left)}; new and unheld {len(unheld)}; daemon's maps with no "
                  f"session {maps_ready} at READY, {maps_end} at the end\n"
                  f"  daemon RSS, second run: {early >> 20} MiB in its first seconds, {late >> 20} MiB at the end; "
                  f"KV peak {self.kv_peak >> 10} KiB of {KV_BUDGET_MIB} MiB; RSS every 5 s (MiB): "
                  f"{[b >> 20 for t, b in run2[::10]]}\n"
                  f"  unexpected: {self.stats.unexpected[:5]}")
        print(report, file=sys.stderr)
        # ctest shows a passing test's output only with -V: the report is kept beside it too.
        with open(os.environ.get("QWEN3_FAULT_REPORT", "fault-report.txt"), "w") as f:
            f.write(report.lstrip() + "\n")
        self.assertEqual(self.stats.unexpected, [])
        self.assertEqual(maps_end, maps_ready, "the daemon holds more maps than at READY with every session deleted")
        self.assertEqual(left, set(), "BPF objects of the daemons outlived them")
        self.assertEqual(unheld, set(), "BPF objects appeared during the test and nobody holds them: " +
                         str(sorted((k, i, after[(k, i)][0]) for k, i in unheld)))
        self.assertLessEqual(late - early, RSS_GROWTH_BOUND, "the daemon's RSS grew over the second run")
        self.assertGreater(n["served"], 60, "too little load to prove anything")
        self.assertGreater(served_at_kill, 20)
        self.assertGreater(n["clients_killed"], 3)
        self.assertGreater(len(expected), 3, "too few sessions had completed requests at the kill")
        self.assertNotEqual(first, self.proc.pid)
        self.assertLess(elapsed, BOUND_S, "the fault test took longer than its bound")


if __name__ == "__main__":
    unittest.main(verbosity=2)
