#!/usr/bin/python3
"""qwen3-bpfd's start-up paths: --check, config errors, the missing default
model, SIGTERM while loading, socket activation, the gRPC connection limit.

Environment: as daemon_harness.py says (set by CMake).
"""

from daemon_harness import *  # noqa: F401,F403  (stubs, fixture, helpers, the modules they use)


class DaemonCommandLineTest(unittest.TestCase):
    """Start-up paths that need no long-running daemon: --check, config errors,
    the missing default model, and socket activation."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="qwen3-bpfd-cli-")
        os.chmod(cls.tmp, 0o755)
        if not stubs_loaded():
            generate_stubs(os.path.join(cls.tmp, "stubs"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def config(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_grpc_socket_has_its_own_connection_limit(self):
        # Issue 22: each listener has its own limit; the gRPC socket had none.
        sock = os.path.join(self.tmp, "limit.sock")
        log = os.path.join(self.tmp, "limit.log")
        conf = self.config("limit.conf", f"model_dir = {MODEL}\nbackend = {BACKEND}\nsocket_path = {sock}\n"
                                         f"socket_group = nogroup\nhttp_socket = off\nstate_dir = {self.tmp}/limit-state\n"
                                         f"persist_sessions = false\ngrpc_max_connections = 3\n")
        proc = start_daemon(conf, log, sock, 120)
        held = []
        try:
            for _ in range(4):  # start_daemon's own channel may still hold one
                c = socket.socket(socket.AF_UNIX)
                c.connect(sock)
                held.append(c)
            channel = grpc.insecure_channel("unix:" + sock)
            with self.assertRaises(grpc.RpcError) as e:
                pb_grpc.Qwen3BpfStub(channel).GetStatus(pb.GetStatusRequest(), timeout=3)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
            channel.close()
            with open(log) as f:
                self.assertIn("connections open (grpc_max_connections)", f.read())
            for c in held:
                c.close()
            held = []
            deadline = time.time() + 10
            while True:  # the closed ones are forgotten: served again
                channel = grpc.insecure_channel("unix:" + sock)
                try:
                    pb_grpc.Qwen3BpfStub(channel).GetStatus(pb.GetStatusRequest(), timeout=3)
                    break
                except grpc.RpcError:
                    self.assertLess(time.time(), deadline)
                    time.sleep(0.2)
                finally:
                    channel.close()
        finally:
            for c in held:
                c.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

    def test_check_runs_the_self_test(self):
        conf = self.config("check.conf", f"model_dir = {MODEL}\nbackend = {BACKEND}\n")
        out = subprocess.run([DAEMON, "--config", conf, "--check"], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        for step in ("load:      ok", "tokenize:  ok", "forward:   ok", "generate:  ok  4 tokens", "check passed"):
            self.assertIn(step, out.stdout)

    def test_config_errors_name_file_line_and_key(self):
        conf = self.config("bad.conf", f"# comment\nmodel_dir = {MODEL}\n\nprecision = q3\n")
        out = subprocess.run([DAEMON, "--config", conf, "--check"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 2)
        self.assertIn(f"{conf}:4: precision must be one of q24|q8|q4 (got 'q3')", out.stderr)
        good = self.config("good.conf", f"model_dir = {MODEL}\n")
        out = subprocess.run([DAEMON, "--config", good, "--precision", "q8", "--threads", "lots"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 2)
        self.assertIn("threads must be an integer", out.stderr)
        out = subprocess.run([DAEMON, "--config", os.path.join(self.tmp, "missing.conf")], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 2)
        self.assertIn("cannot read config file", out.stderr)

    def test_missing_default_model_says_how_to_install_it(self):
        state = os.path.join(self.tmp, "empty-state")
        conf = self.config("nomodel.conf", f"state_dir = {state}\nsocket_path = {self.tmp}/nomodel.sock\n")
        out = subprocess.run([DAEMON, "--config", conf], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 1)
        self.assertIn(f"mkdir -p {state}/models/default && tar -xJf ", out.stderr)
        self.assertIn(f"qwen3-kerneldoc.tar.xz -C {state}/models/default --strip-components=1", out.stderr)
        self.assertFalse(os.path.exists(f"{self.tmp}/nomodel.sock"))

    def test_sigterm_while_loading_exits_promptly(self):
        sock = os.path.join(self.tmp, "early.sock")
        conf = self.config("early.conf", f"model_dir = {MODEL}\nbackend = {BACKEND}\nsocket_path = {sock}\n"
                                         f"state_dir = {self.tmp}/early-state\n")
        proc = subprocess.Popen([DAEMON, "--config", conf], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=dict(os.environ, QWEN3_BPFD_LOAD_DELAY_MS="60000"))
        deadline = time.time() + 30
        while not os.path.exists(sock):
            self.assertLess(time.time(), deadline)
            time.sleep(0.02)
        t = time.time()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, out)
        self.assertLess(time.time() - t, 10)
        self.assertIn("stopped while loading", out)
        self.assertFalse(os.path.exists(sock))

    def test_socket_activation_uses_the_inherited_socket(self):
        path = os.path.join(self.tmp, "activated.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(16)
        conf = self.config("activated.conf", f"model_dir = {MODEL}\nbackend = {BACKEND}\n"
                                             f"socket_path = {self.tmp}/not-used.sock\nstate_dir = {self.tmp}/st\n")

        def as_fd3():
            os.dup2(listener.fileno(), 3)
        # LISTEN_PID must be the daemon's pid: the shell execs it keeping its own.
        proc = subprocess.Popen(["/bin/sh", "-c", f'LISTEN_PID=$$ LISTEN_FDS=1 exec "{DAEMON}" --config "{conf}"'],
                                preexec_fn=as_fd3, pass_fds=(3,), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        try:
            channel = grpc.insecure_channel("unix:" + path)
            stub = pb_grpc.Qwen3BpfStub(channel)
            deadline = time.time() + 120
            while True:
                try:
                    if stub.GetStatus(pb.GetStatusRequest(), timeout=5).load_state == pb.LOAD_STATE_READY:
                        break
                except grpc.RpcError:
                    pass
                self.assertLess(time.time(), deadline, "the activated daemon never became ready")
                time.sleep(0.1)
            st = stub.GetStatus(pb.GetStatusRequest(), timeout=5)
            self.assertEqual(st.socket_path, path)
            self.assertFalse(os.path.exists(f"{self.tmp}/not-used.sock"))
            self.assertTrue(stub.Tokenize(pb.TokenizeRequest(text="activated"), timeout=10).ids)
            channel.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
            listener.close()
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn("socket activation", out)
        self.assertTrue(os.path.exists(path))  # the socket belongs to systemd, not to the daemon


if __name__ == "__main__":
    unittest.main(verbosity=2)
