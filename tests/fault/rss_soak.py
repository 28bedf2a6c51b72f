#!/usr/bin/env python3
"""RSS soak (a measurement, not a CI test): does the daemon's memory level off
under steady load, or grow with the requests served (a leak)?

Starts qwen3-bpfd on a model, then WORKERS clients loop for SECONDS: create a
session, three appended generations on it, delete it, one ephemeral
generation. Every 20 s it prints the requests served and the daemon's RSS split
into anonymous (heap), file and shared (mmapped BPF maps) memory.

  QWEN3_BPFD=build/daemon/app/qwen3-bpfd QWEN3_TEST_MODEL=build/test-models/tiny \\
  QWEN3_PROTO_DIR=proto /usr/bin/python3 tests/fault/rss_soak.py [SECONDS [WORKERS]]
"""

import os
import random
import shutil
import sys
import tempfile
import threading
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import daemon_harness as it  # noqa: E402

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 600
WORKERS = int(sys.argv[2]) if len(sys.argv) > 2 else 8


def memory_mib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(line.split()[1]) >> 10
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="qwen3-bpfd-soak-")
    os.chmod(tmp, 0o755)
    it.generate_stubs(os.path.join(tmp, "stubs"))
    pb, pb_grpc = it.pb, it.pb_grpc
    sock, conf, log = (os.path.join(tmp, n) for n in ("soak.sock", "soak.conf", "daemon.log"))
    with open(conf, "w") as f:
        f.write(f"model_dir = {it.MODEL}\nbackend = {it.BACKEND}\nsocket_path = {sock}\nsocket_group = nogroup\n"
                f"state_dir = {tmp}/state\nmax_sessions = 96\nkv_budget_mib = 64\n"
                f"max_sessions_per_uid = 96\nkv_budget_mib_per_uid = 64\nsession_ttl_seconds = 600\n"
                f"default_context = 256\ndefault_max_new_tokens = 16\nprefill_chunk = 16\nlog_level = warn\n")
    proc = it.start_daemon(conf, log, sock, 120)
    end = time.monotonic() + SECONDS
    served, failed = [0], [0]

    def worker(w):
        rng = random.Random(w)
        stub = pb_grpc.Qwen3BpfStub(grpc.insecure_channel("unix:" + sock))
        n = 0
        while time.monotonic() < end:
            n += 1
            sid = f"w{w}-{n}"
            try:
                stub.CreateSession(pb.CreateSessionRequest(max_context=192, session_id=sid), timeout=30)
                for _ in range(3):
                    req = pb.GenerateRequest(
                        token_ids=[rng.randrange(10, 5000) for _ in range(rng.randrange(1, 12))], session_id=sid,
                        history_mode=pb.HISTORY_MODE_APPEND,
                        stopping=pb.StoppingCriteria(max_new_tokens=rng.randrange(2, 14), ignore_eos=True))
                    list(stub.Generate(req, timeout=60))
                stub.DeleteSession(pb.DeleteSessionRequest(session_id=sid), timeout=30)
                list(stub.Generate(pb.GenerateRequest(prompt="an ephemeral one", stopping=pb.StoppingCriteria(
                    max_new_tokens=8, ignore_eos=True)), timeout=60))
                served[0] += 5
            except grpc.RpcError as e:
                failed[0] += 1
                print(f"worker {w}: {e.code().name}: {e.details()}", flush=True)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    try:
        while time.monotonic() < end:
            m = memory_mib(proc.pid)
            print(f"{time.monotonic() - t0:5.0f} s  requests {served[0]:6d}  RSS {m['VmRSS']} MiB "
                  f"(anon {m['RssAnon']}, file {m['RssFile']}, shmem {m['RssShmem']})", flush=True)
            time.sleep(20)
        for t in threads:
            t.join()
        m = memory_mib(proc.pid)
        print(f"end: {served[0]} requests, {failed[0]} failed; RSS {m['VmRSS']} MiB (anon {m['RssAnon']})", flush=True)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed[0] else 0


if __name__ == "__main__":
    sys.exit(main())
