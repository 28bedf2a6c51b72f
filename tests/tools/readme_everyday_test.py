#!/usr/bin/env python3
"""Runs every command of README.md's "Everyday use" block against a private
qwen3-bpfd (scratch directory, the tiny test model) and checks that each exits
0. The block is parsed from README.md, so the test follows the README; only
the daemon's paths and the placeholders are substituted: ID (the id the
block's `sessions create` printed), prog.c / tests.json (an XDP program and its
fixtures from tests/lib/xdp), and the HTTP socket. `chat` reads one line from
stdin. The curl line must ask for max_tokens and stream, and is run with
--fail so an HTTP error fails it.

usage: readme_everyday_test.py QWEN3_BPF QWEN3_BPFD MODEL_DIR REPO_ROOT
"""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time


def everyday_commands(readme_text):
    """The command lines of the indented block after '## Everyday use'."""
    lines = readme_text.splitlines()
    start = lines.index("## Everyday use") + 1
    block, seen = [], False
    for line in lines[start:]:
        if line.startswith("    "):
            block.append(line[4:])
            seen = True
        elif line.strip() == "" and not seen:
            continue
        else:
            break
    commands, current = [], ""
    for line in block:
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        commands.append(shlex.split(current, comments=True))
        current = ""
    return commands


def main():
    cli, daemon, model, root = sys.argv[1:5]
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        commands = everyday_commands(f.read())
    assert len(commands) >= 5, f"the Everyday use block has {len(commands)} commands: {commands}"
    programs = {c[0] for c in commands}
    assert programs <= {"qwen3-bpf", "curl"}, f"commands this test cannot run: {programs}"
    curls = [c for c in commands if c[0] == "curl"]
    assert curls, "the block has no curl example"
    for c in curls:
        body = " ".join(c)
        assert '"max_tokens"' in body and '"stream":true' in body.replace(" ", ""), f"curl without max_tokens/stream: {c}"

    tmp = tempfile.mkdtemp(prefix="qwen3-readme-")
    os.chmod(tmp, 0o755)
    grpc_sock, http_sock = os.path.join(tmp, "grpc.sock"), os.path.join(tmp, "http.sock")
    conf = os.path.join(tmp, "qwen3-bpfd.conf")
    with open(conf, "w") as f:
        f.write(f"model_dir = {model}\nbackend = bpf\nsocket_path = {grpc_sock}\nhttp_socket = {http_sock}\n"
                f"default_max_new_tokens = 12\nstate_dir = {tmp}/state\npersist_sessions = false\n")
    xdp = os.path.join(root, "tests", "lib", "xdp")
    shutil.copy(os.path.join(xdp, "drop_arp.c"), os.path.join(tmp, "prog.c"))
    shutil.copy(os.path.join(xdp, "drop_arp.fixtures.json"), os.path.join(tmp, "tests.json"))
    env = dict(os.environ, QWEN3_BPF_SOCKET=grpc_sock)
    for k in ("LISTEN_FDS", "LISTEN_PID", "NOTIFY_SOCKET"):
        env.pop(k, None)
    log = open(os.path.join(tmp, "daemon.log"), "w")
    proc = subprocess.Popen([daemon, "--config", conf, "--threads", "2"], stdout=log, stderr=subprocess.STDOUT, env=env)
    failures = []
    try:
        deadline = time.time() + 60
        while not os.path.exists(grpc_sock):
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("the daemon made no socket:\n" + open(log.name).read())
            time.sleep(0.05)
        subprocess.run([cli, "status", "--wait", "--timeout", "300"], env=env, check=True, capture_output=True)
        session = None
        for argv in commands:
            run = [cli if a == "qwen3-bpf" and i == 0 else a for i, a in enumerate(argv)]
            run = [http_sock if a == "/run/qwen3-bpfd/http.sock" else a for a in run]
            if "ID" in run:
                assert session, f"{argv} uses ID before `sessions create`"
                run = [session if a == "ID" else a for a in run]
            if run[0] == "curl":
                run = ["curl", "-sS", "--fail", "--max-time", "300"] + run[1:]
            stdin = "Hello there\n" if argv[1:2] == ["chat"] else ""
            r = subprocess.run(run, cwd=tmp, env=env, input=stdin, capture_output=True, text=True, timeout=600)
            shown = shlex.join(argv)
            if r.returncode != 0:
                failures.append(f"{shown}: exit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}")
                continue
            if argv[1:3] == ["sessions", "create"]:
                session = r.stdout.strip()
            if run[0] == "curl" and "data: [DONE]" not in r.stdout:
                failures.append(f"{shown}: no streamed answer: {r.stdout[-2000:]}")
                continue
            print(f"ok   exit 0: {shown}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if failures:
            print("---- daemon log (tail)\n" + "".join(open(log.name).readlines()[-30:]), file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
