#!/usr/bin/python3
"""Exec-to-first-token latency of a BPF client: the kernel path (doorbell,
no user-space step) against the broker path (the daemon's ring, tokenized
and steered in user space), rounds alternated in one run. The example
(examples/exec_prompt) is attached twice, once per path, under two program
names; each round execs one of them with the same one-byte prompt and spins
on the mmapped result slot (kd_results / qk_results) for the first entry and
the finish. Not a test: prints a table (docs/kernel-clients.md, "Latency").

  bench_exec.py --daemon build/daemon/app/qwen3-bpfd --loader build/examples/exec_prompt/qwen3-bpf-exec-prompt \\
                --model build/test-models/trained [--rounds 7] [--tokens 8]
"""

import argparse
import ctypes
import mmap
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

SLOT = 32 + 40 + 8 + 128 * 32
libc = ctypes.CDLL(None, use_errno=True)


def obj_get(path):
    """BPF_OBJ_GET (cmd 7) of a pinned map: its fd."""
    p = ctypes.create_string_buffer(path.encode())
    attr = struct.pack("<QIIi4x", ctypes.addressof(p), 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, 128)
    fd = libc.syscall(321, 7, buf, len(attr))
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"BPF_OBJ_GET {path}")
    return fd


def slots(path, entries):
    size = (SLOT * entries + 4095) // 4096 * 4096
    return mmap.mmap(obj_get(path), size, mmap.MAP_SHARED, mmap.PROT_READ)


def head(m, k):
    # request_id, produced, finish
    return struct.unpack_from("<III", m, k * SLOT + 32)


def cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def one_round(target, m, k, timeout=30):
    old = head(m, k)[0]
    t0 = time.perf_counter()
    subprocess.run([target, "x"], check=True)
    first = None
    while time.perf_counter() - t0 < timeout:
        rid, produced, finish = head(m, k)
        if rid != old and produced >= 1 and first is None:
            first = time.perf_counter() - t0
        if rid != old and finish:
            return first * 1e3, (time.perf_counter() - t0) * 1e3
    raise RuntimeError("no answer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--loader", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tokens", type=int, default=8)
    a = ap.parse_args()
    os.environ.update(QWEN3_BPFD=a.daemon, QWEN3_TEST_MODEL=a.model,
                      QWEN3_PROTO_DIR=os.path.join(HERE, "..", "..", "proto"))
    import udp_test  # noqa: E402  (reads the environment)
    pin = f"/sys/fs/bpf/qwen3-kcbench-{os.getpid()}"
    d = udp_test.Daemon(kernel_client_pin_dir=pin, driver="auto", precision="q8")
    try:
        while not os.path.exists(os.path.join(pin, "kd_bell")):
            time.sleep(0.1)
        targets = {}
        for path, flag in (("kernel", []), ("broker", ["--broker"])):
            comm = f"qkb-{path}"
            subprocess.run([a.loader, "attach", pin, comm, f"b-{path}", str(a.tokens), *flag], check=True)
            targets[path] = os.path.join(d.tmp, comm)
            shutil.copy("/bin/true", targets[path])
        kd, qk = slots(os.path.join(pin, "kd_results"), 4), slots(os.path.join(pin, "qk_results"), 64)
        one_round(targets["kernel"], kd, 0)  # warm-up; the kernel path's first session is entry 0
        subprocess.run([targets["broker"], "x"], check=True)
        time.sleep(2)
        out = subprocess.run(["bpftool", "-j", "map", "lookup", "pinned", os.path.join(pin, "qk_sessions"), "key",
                              "hex", *[f"{b:02x}" for b in b"b-broker".ljust(32, b"\0")]], capture_output=True,
                             text=True, check=True).stdout
        import json
        bk = struct.unpack("<I", bytes(int(x, 16) for x in json.loads(out)["value"]))[0]
        res = {"kernel": [], "broker": []}
        cpu = {"kernel": 0.0, "broker": 0.0}
        for _ in range(a.rounds):
            for path, m, k in (("kernel", kd, 0), ("broker", qk, bk)):
                c0 = cpu_ms(d.proc.pid)
                res[path].append(one_round(targets[path], m, k))
                cpu[path] += cpu_ms(d.proc.pid) - c0
        print(f"{a.rounds} rounds, prompt 'x' (1 token either way), {a.tokens} greedy tokens, load {os.getloadavg()[0]:.1f}")
        print("| path | exec to first token, best / median ms | exec to finish, best / median ms | daemon CPU ms/request |")
        print("|---|---|---|---|")
        for path in ("kernel", "broker"):
            f = [r[0] for r in res[path]]
            e = [r[1] for r in res[path]]
            print(f"| {path} | {min(f):.1f} / {statistics.median(f):.1f} | {min(e):.1f} / {statistics.median(e):.1f} | "
                  f"{cpu[path] / a.rounds:.1f} |")
        subprocess.run([a.loader, "detach", pin])
    finally:
        d.stop()
        shutil.rmtree(pin, True)


if __name__ == "__main__":
    main()
