#!/usr/bin/python3
"""Who may do what (one daemon, the tiny model): unprivileged peers, session
owners and quotas, the admin group judged per call, socket group changes on
SIGHUP, log level reload; XDP VerifyProgram and GenerateVerified.

Environment: as daemon_harness.py says (set by CMake).
"""

from daemon_harness import *  # noqa: F401,F403  (stubs, fixture, helpers, the modules they use)


class DaemonAccessTest(DaemonFixture):
    def test_unprivileged_peers(self):
        # The socket file is opened up so that only the daemon's SO_PEERCRED check decides.
        os.chmod(self.socket_path, 0o666)
        before = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5).requests.rejected_connections
        # `daemon` is not in the socket group (nogroup): refused at accept.
        out = self.run_as("daemon", "stub.GetStatus(pb.GetStatusRequest(), timeout=5)")
        self.assertTrue(out.startswith("UNAVAILABLE"), out)
        after = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5).requests.rejected_connections
        self.assertGreater(after, before)
        self.assertIn("connection refused", self.daemon_log())
        # The same user holding nogroup as a supplementary group (SO_PEERGROUPS): allowed.
        self.assertEqual(self.run_as("daemon", "stub.GetStatus(pb.GetStatusRequest(), timeout=5)",
                                     extra_groups=("nogroup",)), "OK")
        # `nobody` is in nogroup: allowed, but not an admin.
        self.assertEqual(self.run_as("nobody", "stub.GetStatus(pb.GetStatusRequest(), timeout=5)"), "OK")
        out = self.run_as("nobody", "stub.VerifyProgram(pb.VerifyProgramRequest(source='x'), timeout=5)")
        self.assertTrue(out.startswith("PERMISSION_DENIED"), out)

    @unittest.skipUnless(os.path.isdir(VERIFY_CORPUS), "the XDP corpus of tests/verify is not available")
    def test_verify_program(self):
        source, fixtures = self.verify_case("drop_icmp")
        r = self.stub.VerifyProgram(pb.VerifyProgramRequest(source=source, fixtures=fixtures), timeout=120)
        if r.result.decision == pb.DECISION_UNSPECIFIED:
            self.fail("VerifyProgram returned no decision")
        self.assertEqual(r.result.decision, pb.DECISION_PASS, r.result.summary)
        self.assertEqual(r.result.decision_name, "pass")
        self.assertEqual(len(r.result.fixtures), len(fixtures))
        self.assertTrue(all(f.passed for f in r.result.fixtures))
        self.assertGreater(r.result.verified_insns, 0)
        self.assertIn(r.result.compile_sandbox, ("namespaces+landlock", "namespaces", "landlock"))
        broken, _ = self.verify_case("compile_syntax_error")
        r = self.stub.VerifyProgram(pb.VerifyProgramRequest(source=broken), timeout=120)
        self.assertEqual(r.result.decision, pb.DECISION_FAIL)
        self.assertEqual(r.result.first_failed_stage, pb.STAGE_COMPILE)
        self.assertTrue(r.result.compiler_diagnostics)
        self.assertGreater(r.result.compiler_diagnostics[0].line, 0)

    def test_generate_verified_reports_each_attempt(self):
        # The random test model writes no C; the pipeline must say so cleanly.
        r = self.stub.GenerateVerified(pb.GenerateVerifiedRequest(
            task="Drop every ICMP packet, pass everything else.", attempts=2, max_new_tokens=24), timeout=300)
        self.assertEqual(len(r.attempts), 2)
        self.assertFalse(r.solved)
        for a in r.attempts:
            self.assertTrue(a.messages)
            self.assertNotEqual(a.result.decision, pb.DECISION_PASS)
            self.assertNotEqual(a.result.first_failed_stage, pb.STAGE_NONE)
            self.assertTrue(a.result.summary)
        # The repair attempt was given the first attempt's diagnostic.
        self.assertGreater(len(r.attempts[1].messages), len(r.attempts[0].messages))

    def test_reload_applies_log_level(self):
        self.write_config(log_level="debug")
        self.proc.send_signal(signal.SIGHUP)
        self.wait_until(lambda: "log_level info -> debug" in self.daemon_log(), 10, "the reload message")
        self.assertTrue(self.notify.wait_for("RELOADING=1", 5))
        self.write_config(log_level="info")
        self.proc.send_signal(signal.SIGHUP)
        self.wait_until(lambda: "log_level debug -> info" in self.daemon_log(), 10, "the second reload")

    def test_sessions_belong_to_their_creator(self):
        # Issue 14: any member of the client group could list, continue or delete
        # root's sessions. Three uids: root (this test), nobody (in the socket
        # group) and daemon (given the socket group as a supplementary group).
        os.chmod(self.socket_path, 0o666)  # only SO_PEERCRED decides
        self.stub.CreateSession(pb.CreateSessionRequest(max_context=32, session_id="root-own"), timeout=30)
        self.generate(prompt="root's secret", session_id="root-own")
        nogroup = ("nogroup",)
        listing = "print(sorted(s.session_id for s in stub.ListSessions(pb.ListSessionsRequest(), timeout=5).sessions))"
        self.assertEqual(self.run_as("nobody", listing), "[]\nOK")
        for call in ("stub.GetSession(pb.GetSessionRequest(session_id='root-own'), timeout=5)",
                     "stub.DeleteSession(pb.DeleteSessionRequest(session_id='root-own'), timeout=5)",
                     "list(stub.Generate(pb.GenerateRequest(prompt='x', session_id='root-own'), timeout=30))",
                     "stub.Forward(pb.ForwardRequest(text='x', session_id='root-own'), timeout=30)"):
            out = self.run_as("nobody", call)
            self.assertTrue(out.startswith("NOT_FOUND unknown session 'root-own'"), out)
        # nobody's own session: nobody and root see and use it, daemon does not.
        out = self.run_as("nobody", "print(stub.CreateSession(pb.CreateSessionRequest(max_context=32, "
                                    "session_id='nobody-own'), timeout=30).session.owner_uid)")
        self.assertEqual(out, f"{pwd.getpwnam('nobody').pw_uid}\nOK")
        self.assertEqual(self.run_as("nobody", "list(stub.Generate(pb.GenerateRequest(prompt='mine', "
                                               "session_id='nobody-own'), timeout=30))"), "OK")
        self.assertEqual(self.run_as("nobody", listing), "['nobody-own']\nOK")
        self.assertEqual(self.run_as("daemon", listing, extra_groups=nogroup), "[]\nOK")
        out = self.run_as("daemon", "stub.DeleteSession(pb.DeleteSessionRequest(session_id='nobody-own'), timeout=5)",
                          extra_groups=nogroup)
        self.assertTrue(out.startswith("NOT_FOUND"), out)
        out = self.run_as("daemon", "stub.CreateSession(pb.CreateSessionRequest(max_context=32, "
                                    "session_id='nobody-own'), timeout=30)", extra_groups=nogroup)
        self.assertTrue(out.startswith("FAILED_PRECONDITION"), out)  # the id is taken; nothing else is told
        root_view = {s.session_id: s for s in self.stub.ListSessions(pb.ListSessionsRequest(), timeout=5).sessions}
        self.assertEqual(set(root_view), {"root-own", "nobody-own"})
        self.assertEqual(root_view["root-own"].owner_uid, 0)
        self.assertGreater(root_view["nobody-own"].positions, 0)  # nobody's request ran on it
        self.assertGreater(root_view["root-own"].positions, 0)
        # Root may use and delete anyone's.
        self.generate(token_ids=self.tokenize("root was here"), session_id="nobody-own")
        self.stub.DeleteSession(pb.DeleteSessionRequest(session_id="nobody-own"), timeout=5)
        self.assertEqual(self.run_as("nobody", listing), "[]\nOK")

    def test_one_member_cannot_evict_another_members_sessions(self):
        # Issue 22: the LRU was global, so one group member creating sessions
        # evicted everyone's idle ones. max_sessions is 4 here; nobody creates 70.
        os.chmod(self.socket_path, 0o666)  # only SO_PEERCRED decides
        nogroup = ("nogroup",)
        mine = "print(sorted(s.session_id for s in stub.ListSessions(pb.ListSessionsRequest(), timeout=5).sessions))"
        self.assertEqual(self.run_as("daemon", "for i in (1, 2): stub.CreateSession(pb.CreateSessionRequest("
                                               "max_context=16, session_id=f'daemon-{i}'), timeout=30)",
                                     extra_groups=nogroup), "OK")
        self.assertEqual(self.run_as("nobody", "for i in range(70): stub.CreateSession(pb.CreateSessionRequest("
                                               "max_context=16, session_id=f'nobody-{i}'), timeout=30)"), "OK")
        self.assertEqual(self.run_as("daemon", mine, extra_groups=nogroup), "['daemon-1', 'daemon-2']\nOK")
        self.assertEqual(self.run_as("nobody", mine), "['nobody-68', 'nobody-69']\nOK")  # its own went instead

    def test_admin_right_is_judged_per_call_after_reload(self):
        # Issue 14: a connection kept the admin right it had when accepted, so a
        # SIGHUP that changed admin_group did not apply to it.
        child, ask = self.nobody_client("stub.VerifyProgram(pb.VerifyProgramRequest(source=''), timeout=30)")
        try:
            self.reload_with(admin_group="nogroup")
            granted = ask()  # connects now, while nobody (in nogroup) is an admin
            self.assertIn(granted, ("INVALID_ARGUMENT", "UNIMPLEMENTED"))  # past the admin check: source is empty
            self.reload_with(admin_group="")
            self.assertEqual(ask(), "PERMISSION_DENIED")  # the same connection lost the right
            self.reload_with(admin_group="nogroup")
            self.assertEqual(ask(), granted)  # and got it back
        finally:
            child.stdin.close()
            child.wait(30)
            self.write_config(log_level="info")
            self.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)

    def test_socket_group_change_drops_open_connections(self):
        # Issue 14: access was judged only at accept, so a SIGHUP that took a
        # user out of socket_group left its open connections serving it.
        child, ask = self.nobody_client(
            "stub.GetStatus(pb.GetStatusRequest(), timeout=30, wait_for_ready=line.strip() == 'wait')")
        try:
            self.assertEqual(ask(), "OK")  # connected while nobody (in nogroup) may use the socket
            dropped = self.daemon_log().count("no longer in socket group")
            self.reload_with(socket_group="")  # root only
            self.assertEqual(self.daemon_log().count("no longer in socket group"), dropped + 1)
            self.assertEqual(ask(), "UNAVAILABLE")  # the open connection is gone and a new one is refused
            self.assertEqual(self.stub.GetStatus(pb.GetStatusRequest(), timeout=5).load_state,
                             pb.LOAD_STATE_READY)  # root's connection was kept
            self.reload_with(socket_group="nogroup")
            self.assertEqual(ask("wait"), "OK")  # and nobody may connect again
        finally:
            child.stdin.close()
            child.wait(30)
            child.stdout.close()
            self.write_config(log_level="info")
            self.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
