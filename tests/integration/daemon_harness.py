#!/usr/bin/python3
"""The harness of qwen3-bpfd's integration tests: an independent gRPC client.

Stubs are generated from the .proto at test time (generate_stubs; `pb`,
`pb_grpc`, `health_pb`, `health_grpc` stand for the generated modules once it
ran). DaemonFixture starts the daemon on a temporary socket with the generated
`tiny` model and a NOTIFY_SOCKET the test reads; the test files are
daemon_test.py (the API), daemon_access_test.py (who may do what, verify),
daemon_crash_test.py (state across kill -9) and daemon_cli_test.py (start-up
paths); the fault test, the config reload test and the benches use it too.

Environment (set by CMake):
  QWEN3_BPFD        path of the qwen3-bpfd executable
  QWEN3_TEST_MODEL  model directory (tiny)
  QWEN3_PROTO_DIR   proto_path holding qwen3bpf/v1/qwen3bpf.proto
  QWEN3_BACKEND     bpf | reference
  QWEN3_VERIFY_CORPUS  tests/verify/corpus (XDP programs with fixtures)
"""

import json
import os
import pwd
import grp
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

DAEMON = os.environ.get("QWEN3_BPFD", "")
MODEL = os.environ.get("QWEN3_TEST_MODEL", "")
PROTO_DIR = os.environ.get("QWEN3_PROTO_DIR", "")
BACKEND = os.environ.get("QWEN3_BACKEND", "bpf")
VERIFY_CORPUS = os.environ.get("QWEN3_VERIFY_CORPUS", "")
LOAD_DELAY_MS = 1500  # keeps the daemon in the loading state long enough to observe it
KV_BUDGET_MIB = 4     # with max_sessions 4: four busy 512-position sessions of the tiny model fit
MAX_CONTEXT = 8192

class _Generated:
    """Stands for a generated stub module until generate_stubs loads it, so
    `from daemon_harness import pb` works before the stubs exist."""

    def __init__(self, name):
        self._name = name
        self._module = None

    def __getattr__(self, attr):
        if self._module is None:
            raise RuntimeError(f"{self._name}: generate_stubs() has not run")
        return getattr(self._module, attr)


pb = _Generated("qwen3bpf_pb2")
pb_grpc = _Generated("qwen3bpf_pb2_grpc")
health_pb = _Generated("health_pb2")
health_grpc = _Generated("health_pb2_grpc")


def stubs_loaded():
    return pb._module is not None


def generate_stubs(out_dir):
    """Python stubs from the .proto, with Debian's grpc_tools."""
    from grpc_tools import protoc
    os.makedirs(out_dir, exist_ok=True)
    health_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "protos")
    for include, proto in ((PROTO_DIR, "qwen3bpf/v1/qwen3bpf.proto"), (health_dir, "test_health/health.proto")):
        rc = protoc.main(["protoc", f"-I{include}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                          os.path.join(include, proto)])
        if rc != 0:
            raise RuntimeError(f"grpc_tools.protoc failed with {rc} for {proto}")
        for d in (os.path.dirname(proto), os.path.dirname(os.path.dirname(proto))):
            while d:
                open(os.path.join(out_dir, d, "__init__.py"), "a").close()
                d = os.path.dirname(d)
    sys.path.insert(0, out_dir)
    from qwen3bpf.v1 import qwen3bpf_pb2, qwen3bpf_pb2_grpc
    from test_health import health_pb2, health_pb2_grpc
    for stand_in, module in ((pb, qwen3bpf_pb2), (pb_grpc, qwen3bpf_pb2_grpc), (health_pb, health_pb2),
                             (health_grpc, health_pb2_grpc)):
        stand_in._module = module


def start_daemon(config_path, log_path, socket_path, timeout_s, daemon=None):
    """Starts qwen3-bpfd (`daemon`, else $QWEN3_BPFD) with `config_path`, its output
    appended to `log_path`, and returns the process once it answers READY on
    `socket_path`; raises AssertionError with the log when it exits or is not
    ready in time."""
    with open(log_path, "a") as log:
        proc = subprocess.Popen([daemon or DAEMON, "--config", config_path], stdout=log, stderr=subprocess.STDOUT)
    stub = pb_grpc.Qwen3BpfStub(grpc.insecure_channel("unix:" + socket_path))
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise AssertionError("the daemon exited:\n" + open(log_path).read())
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError("the daemon never became ready:\n" + open(log_path).read())
        if os.path.exists(socket_path):
            try:
                if stub.GetStatus(pb.GetStatusRequest(), timeout=5).load_state == pb.LOAD_STATE_READY:
                    return proc
            except grpc.RpcError:
                pass
        time.sleep(0.05)


class BenchDaemon:
    """For the bench scripts: a daemon of their own in a fresh temp dir, with
    stubs from `proto_dir`, a config of the model, socket, log and state keys
    plus `keys`; `stub` is its client, `ready_s` the seconds to READY.
    Stopped and cleaned up on exit:  with BenchDaemon(...) as d: d.stub..."""

    def __init__(self, daemon, model, proto_dir, prefix, **keys):
        global PROTO_DIR
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        PROTO_DIR = os.path.abspath(proto_dir)
        generate_stubs(os.path.join(self.tmp, "stubs"))
        sock = os.path.join(self.tmp, "s.sock")
        conf = os.path.join(self.tmp, "c.conf")
        lines = dict(model_dir=os.path.abspath(model), socket_path=sock, log_level="warn", state_dir=self.tmp)
        lines.update(keys)
        with open(conf, "w") as f:
            f.write("".join(f"{k} = {v}\n" for k, v in lines.items()))
        t0 = time.time()
        try:
            self.proc = start_daemon(conf, os.path.join(self.tmp, "daemon.log"), sock, 600, daemon=daemon)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self.ready_s = time.time() - t0
        self.stub = pb_grpc.Qwen3BpfStub(grpc.insecure_channel("unix:" + sock))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.tmp, ignore_errors=True)


class NotifyListener:
    """The datagram socket that stands in for systemd's NOTIFY_SOCKET."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            with self.lock:
                self.messages.append(data.decode(errors="replace"))

    def all(self):
        with self.lock:
            return list(self.messages)

    def wait_for(self, needle, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(needle in m for m in self.all()):
                return True
            time.sleep(0.05)
        return False

    def close(self):
        self.sock.close()


def client_script(stubs, socket_path, user, extra_groups=()):
    """The start of a Python client that runs as `user` (with `extra_groups` as
    its supplementary groups) and has `stub` connected to the daemon."""
    pw = pwd.getpwnam(user)
    groups = [grp.getgrnam(g).gr_gid for g in extra_groups]
    return f"""
import sys, grpc, os
sys.path.insert(0, {stubs!r})
from qwen3bpf.v1 import qwen3bpf_pb2 as pb, qwen3bpf_pb2_grpc as g
os.setgroups({groups!r}); os.setgid({pw.pw_gid}); os.setuid({pw.pw_uid})
stub = g.Qwen3BpfStub(grpc.insecure_channel('unix:{socket_path}'))
"""


def run_client_as(stubs, socket_path, user, call, extra_groups=(), timeout=120):
    """Runs `call` in a client as `user`; returns what it printed, then OK or its status name and details."""
    script = client_script(stubs, socket_path, user, extra_groups) + f"""
try:
    {call}
    print('OK')
except grpc.RpcError as e:
    print(e.code().name, e.details())
"""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout).stdout.strip()


def bpf_maps_of(pid):
    """Ids of the BPF maps the process holds open, from /proc/<pid>/fdinfo (map_id: lines)."""
    ids = set()
    fdinfo = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    if line.startswith("map_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass  # closed meanwhile
    # Cross-check with the kernel's list: every one of them exists.
    listed = {m["id"] for m in json.loads(subprocess.run(["bpftool", "map", "list", "-j"], capture_output=True,
                                                          text=True, check=True).stdout or "[]")}
    assert ids <= listed, f"maps {ids - listed} held by {pid} are not listed by bpftool"
    return ids


class DaemonFixture(unittest.TestCase):
    """One daemon for the tests of a class: started in setUpClass (observed
    while loading, then until SERVING), killed in tearDownClass; sessions left
    by a test are deleted before the next."""
    @classmethod
    def setUpClass(cls):
        if not (DAEMON and MODEL and PROTO_DIR):
            raise RuntimeError("QWEN3_BPFD, QWEN3_TEST_MODEL and QWEN3_PROTO_DIR must be set")
        cls.tmp = tempfile.mkdtemp(prefix="qwen3-bpfd-it-")
        os.chmod(cls.tmp, 0o755)  # unprivileged test clients must reach the socket
        generate_stubs(os.path.join(cls.tmp, "stubs"))
        cls.socket_path = os.path.join(cls.tmp, "qwen3-bpfd.sock")
        cls.config_path = os.path.join(cls.tmp, "qwen3-bpfd.conf")
        cls.log_path = os.path.join(cls.tmp, "daemon.log")
        cls.write_config(log_level="info")
        cls.notify = NotifyListener(os.path.join(cls.tmp, "notify.sock"))
        env = dict(os.environ, NOTIFY_SOCKET=cls.notify.path, QWEN3_BPFD_LOAD_DELAY_MS=str(LOAD_DELAY_MS),
                   WATCHDOG_USEC="400000")
        env.pop("LISTEN_FDS", None)
        cls.log = open(cls.log_path, "w")
        cls.proc = subprocess.Popen([DAEMON, "--config", cls.config_path, "--foreground"],
                                    stdout=cls.log, stderr=subprocess.STDOUT, env=env)
        try:
            cls.wait_until_serving()
        except BaseException:
            # tearDownClass does not run when setUpClass fails: leave no daemon behind.
            cls.proc.kill()
            cls.proc.wait()
            raise

    @classmethod
    def wait_until_serving(cls):
        deadline = time.time() + 30
        while not os.path.exists(cls.socket_path):
            if cls.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("daemon did not create its socket:\n" + open(cls.log_path).read())
            time.sleep(0.02)
        cls.channel = grpc.insecure_channel("unix:" + cls.socket_path)
        cls.stub = pb_grpc.Qwen3BpfStub(cls.channel)
        cls.health = health_grpc.HealthStub(cls.channel)

        # Observations while loading; asserted in test_health_transitions.
        cls.loading_health = cls.health.Check(health_pb.HealthCheckRequest(), timeout=5).status
        cls.loading_status = cls.stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        try:
            cls.stub.Tokenize(pb.TokenizeRequest(text="hi"), timeout=5)
            cls.loading_error = None
        except grpc.RpcError as e:
            cls.loading_error = e
        deadline = time.time() + 600
        while cls.health.Check(health_pb.HealthCheckRequest(), timeout=5).status != \
                health_pb.HealthCheckResponse.SERVING:
            if cls.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("daemon never became SERVING:\n" + open(cls.log_path).read())
            time.sleep(0.05)
        cls.serving_health = health_pb.HealthCheckResponse.SERVING
        cls.vocab = cls.stub.GetStatus(pb.GetStatusRequest(), timeout=5).model.vocab_size

    @classmethod
    def write_config(cls, log_level, admin_group="", socket_group="nogroup", speculative="auto"):
        with open(cls.config_path, "w") as f:
            f.write(f"""# integration test configuration
model_dir = {MODEL}
backend = {BACKEND}
socket_path = {cls.socket_path}
socket_group = {socket_group}   # nogroup: nobody is a member, daemon is not
admin_group = {admin_group}
speculative = {speculative}
max_sessions = 4
kv_budget_mib = {KV_BUDGET_MIB}
session_ttl_seconds = 600
default_context = 256
max_context = {MAX_CONTEXT}
default_max_new_tokens = 16
prefill_chunk = 16
log_level = {log_level}
state_dir = {cls.tmp}/state
""")

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait()
        cls.channel.close()
        cls.notify.close()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def setUp(self):
        for s in self.stub.ListSessions(pb.ListSessionsRequest(), timeout=5).sessions:
            try:
                self.stub.DeleteSession(pb.DeleteSessionRequest(session_id=s.session_id), timeout=5)
            except grpc.RpcError:
                pass

    def tokenize(self, text):
        return list(self.stub.Tokenize(pb.TokenizeRequest(text=text), timeout=10).ids)

    def generate(self, timeout=120, **kw):
        stopping = kw.pop("stopping", None) or pb.StoppingCriteria(max_new_tokens=8, ignore_eos=True)
        # Greedy, asked for: without sampling the daemon samples as the model's generation_config says.
        kw.setdefault("sampling", pb.SamplingParams(temperature=0))
        return list(self.stub.Generate(pb.GenerateRequest(stopping=stopping, **kw), timeout=timeout))

    def assert_code(self, code, fn, *args, contains=None, **kw):
        with self.assertRaises(grpc.RpcError) as cm:
            r = fn(*args, **kw)
            if hasattr(r, "__iter__") and not hasattr(r, "ListFields"):
                list(r)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        if contains:
            self.assertIn(contains, cm.exception.details())
        return cm.exception.details()

    def daemon_log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_until(self, predicate, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        self.fail("timed out waiting for " + what)

    def http(self, method, path, body=None):
        """One request to the HTTP API socket next to the gRPC one: (status, body text)."""
        payload = json.dumps(body).encode() if body is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n").encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(120)
            c.connect(os.path.join(self.tmp, "http.sock"))
            c.sendall(head + payload)
            data = b""
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), rest.decode()

    def metrics_sample(self, name):
        """One unlabelled sample of the daemon's /metrics."""
        status, text = self.http("GET", "/metrics")
        self.assertEqual(status, 200)
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        self.fail(name + " not in /metrics")

    def run_as(self, user, call, extra_groups=()):
        """Runs a call in a child that setuid's to `user` (with `extra_groups` as its
        supplementary groups); returns its status name and details, or OK."""
        return run_client_as(os.path.join(self.tmp, "stubs"), self.socket_path, user, call, extra_groups)

    def verify_case(self, name):
        with open(os.path.join(VERIFY_CORPUS, name + ".c")) as f:
            source = f.read()
        with open(os.path.join(VERIFY_CORPUS, name + ".json")) as f:
            fixtures = [pb.Fixture(**fx) for fx in json.load(f)["fixtures"]]
        return source, fixtures

    def reload_with(self, **keys):
        """Rewrites the config with `keys` (admin_group, socket_group, speculative), sends SIGHUP and
        waits until the daemon logs each of them as in force."""
        before = {k: self.daemon_log().count(f"reload: {k}") for k in keys}
        self.write_config(log_level="info", **keys)
        self.proc.send_signal(signal.SIGHUP)
        self.wait_until(lambda: all(self.daemon_log().count(f"reload: {k}") > n for k, n in before.items()), 10,
                        "the reload")

    def nobody_client(self, call):
        """A client process running as `nobody` on one connection: each ask(line) runs
        `call` (Python, may read `line`) once and returns OK or the gRPC status name."""
        os.chmod(self.socket_path, 0o666)
        script = client_script(os.path.join(self.tmp, "stubs"), self.socket_path, "nobody") + f"""
for line in sys.stdin:
    try:
        {call}
        print('OK', flush=True)
    except grpc.RpcError as e:
        print(e.code().name, flush=True)
"""
        child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)

        def ask(line="now"):
            child.stdin.write(line + "\n")
            child.stdin.flush()
            return child.stdout.readline().strip()
        return child, ask
