#!/usr/bin/python3
"""The daemon's API end to end (one daemon, the tiny model): health while loading,
tokenize, streaming, logprobs, stops, sampling defaults, chat, sessions and
the prompt cache, speculative decoding, cancellation, concurrency, errors,
limits, kernel memory, scheduling fairness, SIGTERM.

Environment: as daemon_harness.py says (set by CMake).
"""

from daemon_harness import *  # noqa: F401,F403  (stubs, fixture, helpers, the modules they use)


class DaemonTest(DaemonFixture):
    def test_health_transitions(self):
        self.assertEqual(self.loading_health, health_pb.HealthCheckResponse.NOT_SERVING)
        self.assertEqual(self.loading_status.load_state, pb.LOAD_STATE_LOADING)
        self.assertLess(self.loading_status.load_progress, 1.0)
        self.assertTrue(self.loading_status.load_message)
        self.assertIsNotNone(self.loading_error)
        self.assertEqual(self.loading_error.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("loading", self.loading_error.details())
        # systemd saw load progress, then READY=1.
        msgs = self.notify.all()
        self.assertTrue(any(m.startswith("STATUS=loading") for m in msgs), msgs)
        ready = [i for i, m in enumerate(msgs) if "READY=1" in m]
        self.assertTrue(ready, msgs)
        loading = [i for i, m in enumerate(msgs) if "STATUS=loading" in m]
        self.assertLess(loading[0], ready[0])
        # WATCHDOG_USEC=400000: pinged every 200 ms, during loading too.
        self.assertTrue(self.notify.wait_for("WATCHDOG=1", 2), msgs)
        st = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        self.assertEqual(st.load_state, pb.LOAD_STATE_READY)
        self.assertEqual(st.load_progress, 1.0)
        self.assertEqual(st.model.path, MODEL)
        self.assertFalse(st.model.is_default_model)
        self.assertEqual(st.backend.name, BACKEND)
        self.assertGreater(st.model.num_hidden_layers, 0)
        self.assertEqual(st.socket_path, self.socket_path)
        if BACKEND == "bpf":
            self.assertGreater(st.backend.bpf_programs, 0)
            self.assertGreater(st.backend.bpf_maps, 0)

    def test_tokenize_detokenize_round_trip(self):
        text = "Hello, kernel! Grüße <|im_start|>"
        r = self.stub.Tokenize(pb.TokenizeRequest(text=text, return_pieces=True), timeout=10)
        self.assertEqual(len(r.ids), len(r.pieces))
        self.assertIn(151644, r.ids)  # <|im_start|> parsed as the special token
        plain = self.stub.Tokenize(pb.TokenizeRequest(text=text, split_special_tokens=True), timeout=10)
        self.assertNotIn(151644, plain.ids)
        back = self.stub.Detokenize(pb.DetokenizeRequest(ids=r.ids), timeout=10).text
        self.assertEqual(back, text)

    def test_streaming_order_and_usage(self):
        prompt = "The verifier accepts the program because"
        ids = self.tokenize(prompt)
        msgs = self.generate(prompt=prompt, stopping=pb.StoppingCriteria(max_new_tokens=12, ignore_eos=True))
        tokens, last = msgs[:-1], msgs[-1]
        self.assertEqual(len(tokens), 12)
        self.assertEqual([m.index for m in tokens], list(range(12)))
        for m in tokens:
            self.assertEqual(m.finish_reason, pb.FINISH_REASON_UNSPECIFIED)
            self.assertGreaterEqual(m.token_id, 0)
            self.assertLess(m.token_id, self.vocab)
        self.assertEqual(last.finish_reason, pb.FINISH_REASON_LENGTH)
        self.assertEqual(last.token_id, -1)
        self.assertEqual(last.usage.prompt_tokens, len(ids))
        self.assertEqual(last.usage.cached_tokens, 0)
        self.assertEqual(last.usage.completion_tokens, 12)
        self.assertGreater(last.timings.prefill_ms, 0)
        self.assertGreater(last.timings.decode_ms, 0)
        # The streamed deltas add up to the decoded completion.
        streamed = "".join(m.text for m in msgs)
        decoded = self.stub.Detokenize(pb.DetokenizeRequest(ids=[m.token_id for m in tokens],
                                                            skip_special_tokens=True), timeout=10).text
        self.assertEqual(streamed, decoded)
        # Greedy generation starts with the argmax Forward reports.
        fwd = self.stub.Forward(pb.ForwardRequest(text=prompt, top_k=5), timeout=60)
        self.assertEqual(fwd.top[0].id, tokens[0].token_id)
        self.assertEqual(list(fwd.input_ids), ids)
        self.assertEqual(len(fwd.top), 5)
        self.assertTrue(all(fwd.top[i].logit >= fwd.top[i + 1].logit for i in range(4)))
        self.assertTrue(all(t.logprob <= 0 for t in fwd.top))

    def test_logprobs_and_forward_all_positions(self):
        msgs = self.generate(prompt="One two three", logprobs=3)
        for m in msgs[:-1]:
            self.assertEqual(len(m.logprobs.top), 3)
            self.assertEqual(m.logprobs.top[0].id, m.token_id)  # greedy picks the best
            self.assertAlmostEqual(m.logprobs.logprob, m.logprobs.top[0].logprob, places=4)
        ids = self.tokenize("one two three four five")
        fwd = self.stub.Forward(pb.ForwardRequest(token_ids=ids, all_positions=True, full_logits=True), timeout=60)
        self.assertEqual(len(fwd.position_argmax), len(ids))
        self.assertEqual(len(fwd.logits), self.vocab)
        self.assertEqual(fwd.position_argmax[-1], fwd.top[0].id)
        best = max(range(len(fwd.logits)), key=lambda i: fwd.logits[i])
        self.assertEqual(best, fwd.top[0].id)

    def test_stop_strings_are_excluded(self):
        # Find text the model will produce, then ask it to stop there.
        free = self.generate(prompt="Count: 1 2 3", stopping=pb.StoppingCriteria(max_new_tokens=12, ignore_eos=True))
        text = "".join(m.text for m in free)
        if len(text.strip()) < 4:
            self.skipTest("the random test model produced too little text to pick a stop string from")
        middle = len(text) // 2
        stop = text[middle:middle + 2]
        msgs = self.generate(prompt="Count: 1 2 3",
                             stopping=pb.StoppingCriteria(max_new_tokens=12, ignore_eos=True, stop=[stop]))
        out = "".join(m.text for m in msgs)
        self.assertEqual(msgs[-1].finish_reason, pb.FINISH_REASON_STOP_SEQUENCE)
        self.assertEqual(msgs[-1].stop_sequence, stop)
        self.assertEqual(out, text[:text.find(stop)])

    def test_no_sampling_options_sample_as_generation_config_says(self):
        # Issue 12: the tiny model's generation_config.json says temperature 0.6;
        # a request without sampling options used to decode greedily anyway.
        with open(os.path.join(MODEL, "generation_config.json")) as f:
            self.assertGreater(json.load(f).get("temperature", 0), 0)
        stopping = pb.StoppingCriteria(max_new_tokens=8, ignore_eos=True)
        sampled = list(self.stub.Generate(pb.GenerateRequest(prompt="Count: 1 2 3", stopping=stopping), timeout=120))
        self.assertNotEqual(sampled[-1].seed, 0)  # a seed was drawn: it sampled
        greedy = self.generate(prompt="Count: 1 2 3", stopping=stopping)  # asks for temperature 0
        self.assertEqual(greedy[-1].seed, 0)
        # The drawn seed reproduces the sampled tokens with the model's defaults made explicit.
        with open(os.path.join(MODEL, "generation_config.json")) as f:
            gc = json.load(f)
        again = self.generate(prompt="Count: 1 2 3", stopping=stopping, sampling=pb.SamplingParams(
            temperature=gc.get("temperature", 0), top_k=gc.get("top_k", 0), top_p=gc.get("top_p", 0),
            seed=sampled[-1].seed))
        self.assertEqual([m.token_id for m in again], [m.token_id for m in sampled])

    def test_chat_messages(self):
        msgs = self.generate(messages=[pb.ChatMessage(role="user", content="Say hi")])
        self.assertEqual(msgs[-1].usage.completion_tokens, 8)
        ids = self.tokenize("<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
        self.assertEqual(msgs[-1].usage.prompt_tokens, len(ids))

    def test_session_continuation_uses_cache(self):
        sid = self.stub.CreateSession(pb.CreateSessionRequest(max_context=128), timeout=30).session.session_id
        prompt_ids = self.tokenize("Sessions keep their keys and values")
        first = self.generate(token_ids=prompt_ids, session_id=sid,
                              stopping=pb.StoppingCriteria(max_new_tokens=4, ignore_eos=True))
        self.assertEqual(first[-1].usage.cached_tokens, 0)
        gen = [m.token_id for m in first[:-1]]
        info = self.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=5).session
        # The last generated token is known but not yet fed.
        self.assertEqual(info.positions, len(prompt_ids) + 3)
        self.assertEqual(info.history_tokens, len(prompt_ids) + 4)
        self.assertGreater(info.memory_bytes, 0)
        self.assertFalse(info.busy)

        more = self.tokenize(" and more")
        full = prompt_ids + gen + more
        second = self.generate(token_ids=full, session_id=sid)
        self.assertEqual(second[-1].usage.prompt_tokens, len(full))
        self.assertEqual(second[-1].usage.cached_tokens, len(prompt_ids) + 3)
        # Same answer as computing everything from scratch.
        fresh = self.generate(token_ids=full)
        self.assertEqual([m.token_id for m in second[:-1]], [m.token_id for m in fresh[:-1]])
        self.assertEqual(fresh[-1].usage.cached_tokens, 0)

        # APPEND mode: the request's tokens follow everything the session holds.
        held = self.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=5).session
        third = self.generate(token_ids=more, session_id=sid, history_mode=pb.HISTORY_MODE_APPEND)
        self.assertEqual(third[-1].usage.prompt_tokens, held.history_tokens + len(more))
        self.assertEqual(third[-1].usage.cached_tokens, held.positions)

        # Diverging history: the cache is cut back to the common prefix.
        diverged = prompt_ids[:3] + self.tokenize(" something else entirely")
        fourth = self.generate(token_ids=diverged, session_id=sid)
        self.assertEqual(fourth[-1].usage.cached_tokens, 3)

        # Forward continues a session the same way.
        f1 = self.stub.Forward(pb.ForwardRequest(token_ids=diverged, session_id=sid), timeout=60)
        self.assertEqual(f1.usage.cached_tokens, len(diverged) - 1)
        self.assertEqual(f1.session_positions, len(diverged))

    def test_speculative_decoding_is_exact_and_switchable(self):
        # A repetitive prompt: the lookup finds drafts, the random model takes
        # some and refuses others.
        ids = self.tokenize("a b c d a b c d a b c d a b c d a b")
        stopping = pb.StoppingCriteria(max_new_tokens=40, ignore_eos=True)
        drafted0 = self.metrics_sample("qwen3_bpfd_speculative_draft_tokens_total")
        accepted0 = self.metrics_sample("qwen3_bpfd_speculative_accepted_tokens_total")
        off = self.generate(token_ids=ids, stopping=stopping, speculative=pb.SPECULATIVE_OFF)
        on = self.generate(token_ids=ids, stopping=stopping, speculative=pb.SPECULATIVE_ON)
        # The config's default, auto: off for q8, the daemon's default precision (speculation_pays);
        # a default of on is test_speculative_default_follows_a_reload's.
        default = self.generate(token_ids=ids, stopping=stopping)
        self.assertEqual([m.token_id for m in on], [m.token_id for m in off])
        self.assertEqual([m.index for m in on[:-1]], list(range(40)))
        self.assertEqual("".join(m.text for m in on), "".join(m.text for m in off))
        self.assertEqual(off[-1].usage.speculative_draft_tokens, 0)
        self.assertEqual(off[-1].usage.completion_tokens, 40)
        self.assertEqual(on[-1].usage.completion_tokens, 40)
        u = on[-1].usage
        self.assertGreater(u.speculative_draft_tokens, 0)
        self.assertGreater(u.speculative_accepted_tokens, 0)
        self.assertLessEqual(u.speculative_accepted_tokens, u.speculative_draft_tokens)
        self.assertEqual([m.token_id for m in default], [m.token_id for m in off])
        self.assertEqual(default[-1].usage.speculative_draft_tokens, 0)
        # Logprobs requests decode plainly.
        lp = self.generate(token_ids=ids, stopping=stopping, logprobs=2, speculative=pb.SPECULATIVE_ON)
        self.assertEqual([m.token_id for m in lp], [m.token_id for m in off])
        self.assertEqual(lp[-1].usage.speculative_draft_tokens, 0)
        # The counters moved by exactly what the requests reported.
        self.assertEqual(self.metrics_sample("qwen3_bpfd_speculative_draft_tokens_total") - drafted0,
                         u.speculative_draft_tokens + default[-1].usage.speculative_draft_tokens)
        self.assertEqual(self.metrics_sample("qwen3_bpfd_speculative_accepted_tokens_total") - accepted0,
                         u.speculative_accepted_tokens + default[-1].usage.speculative_accepted_tokens)
        # The new counters keep the exposition valid (tests/http checks the rest with promtool too).
        if shutil.which("promtool"):
            _, text = self.http("GET", "/metrics")
            r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # The HTTP API's extra field: the same text, the drafts in completion_tokens_details.
        prompt = "a b c d a b c d a b c d a b c d a b"
        answers = {}
        for flag in (False, True):
            status, text = self.http("POST", "/v1/completions", {
                "prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True,
                "cache_prompt": False, "speculative": flag})
            self.assertEqual(status, 200, text)
            answers[flag] = json.loads(text)
        self.assertEqual(answers[True]["choices"][0]["text"], answers[False]["choices"][0]["text"])
        self.assertEqual(answers[False]["usage"]["completion_tokens_details"]["accepted_prediction_tokens"], 0)
        self.assertGreater(answers[True]["usage"]["completion_tokens_details"]["accepted_prediction_tokens"], 0)
        status, text = self.http("POST", "/v1/completions", {"prompt": prompt, "speculative": "yes"})
        self.assertEqual(status, 400, text)
        self.assertIn("speculative", text)
        # An unknown enum value is refused with a message.
        self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.generate, token_ids=ids, speculative=7,
                         contains="speculative")

    def test_kernel_driver_gives_the_user_drivers_tokens(self):
        # driver = auto (the default) loads the kernel driver for requests that ask for it.
        ids = self.tokenize("the kernel runs the model on its own")
        stopping = pb.StoppingCriteria(max_new_tokens=24, ignore_eos=True)
        seeded = pb.SamplingParams(temperature=0.9, top_p=0.9, seed=5,
                                   set_fields=["temperature", "top_p", "seed"])
        gens0 = self.metrics_sample("qwen3_bpfd_kernel_driven_generations_total")
        toks0 = self.metrics_sample("qwen3_bpfd_kernel_driven_tokens_total")
        for sampling in (pb.SamplingParams(temperature=0, set_fields=["temperature"]), seeded):
            user = self.generate(token_ids=ids, stopping=stopping, sampling=sampling, driver=pb.DRIVER_USER)
            kern = self.generate(token_ids=ids, stopping=stopping, sampling=sampling, driver=pb.DRIVER_KERNEL)
            self.assertEqual([m.token_id for m in kern], [m.token_id for m in user])
            self.assertEqual("".join(m.text for m in kern), "".join(m.text for m in user))
            self.assertEqual(kern[-1].usage.completion_tokens, 24)
            self.assertEqual(kern[-1].finish_reason, pb.FINISH_REASON_LENGTH)
        self.assertEqual(self.metrics_sample("qwen3_bpfd_kernel_driven_generations_total") - gens0, 2)
        self.assertEqual(self.metrics_sample("qwen3_bpfd_kernel_driven_tokens_total") - toks0, 48)
        # A session continued on the kernel driver stays in step with one on the user driver.
        continued = {}
        for driver in (pb.DRIVER_USER, pb.DRIVER_KERNEL):
            sid = self.stub.CreateSession(pb.CreateSessionRequest(max_context=128), timeout=30).session.session_id
            first = self.generate(token_ids=ids, session_id=sid, stopping=stopping, driver=driver)
            info = self.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=5).session
            self.assertEqual(info.positions, len(ids) + 23)  # the last token is known but not yet fed
            more = self.generate(token_ids=[], session_id=sid, history_mode=pb.HISTORY_MODE_APPEND,
                                 stopping=stopping, driver=driver)
            continued[driver] = [m.token_id for m in first[:-1] + more[:-1]]
        self.assertEqual(continued[pb.DRIVER_KERNEL], continued[pb.DRIVER_USER])
        # A stop string ends the kernel's chain as it ends the user driver's loop.
        text = "".join(m.text for m in user)
        stop = text[len(text) // 2:len(text) // 2 + 3]
        with_stop = {}
        for driver in (pb.DRIVER_USER, pb.DRIVER_KERNEL):
            msgs = self.generate(token_ids=ids, sampling=seeded, driver=driver,
                                 stopping=pb.StoppingCriteria(max_new_tokens=24, ignore_eos=True, stop=[stop]))
            with_stop[driver] = ("".join(m.text for m in msgs), msgs[-1].finish_reason)
        self.assertEqual(with_stop[pb.DRIVER_KERNEL], with_stop[pb.DRIVER_USER])
        self.assertEqual(with_stop[pb.DRIVER_KERNEL][1], pb.FINISH_REASON_STOP_SEQUENCE)
        # Logprobs decode in user space (the kernel driver does not serve them): the same tokens.
        gens1 = self.metrics_sample("qwen3_bpfd_kernel_driven_generations_total")
        lp = self.generate(token_ids=ids, stopping=stopping, sampling=seeded, logprobs=2, driver=pb.DRIVER_KERNEL)
        lp_user = self.generate(token_ids=ids, stopping=stopping, sampling=seeded, logprobs=2, driver=pb.DRIVER_USER)
        self.assertEqual([m.token_id for m in lp], [m.token_id for m in lp_user])
        self.assertTrue(lp[0].HasField("logprobs"))
        self.assertEqual(self.metrics_sample("qwen3_bpfd_kernel_driven_generations_total"), gens1)
        # HTTP: the body's "driver"; a stop string ends the kernel's chain.
        answers = {}
        for driver in ("user", "kernel"):
            status, text = self.http("POST", "/v1/completions", {
                "prompt": "the kernel runs", "max_tokens": 20, "temperature": 0, "ignore_eos": True,
                "cache_prompt": False, "driver": driver})
            self.assertEqual(status, 200, text)
            answers[driver] = json.loads(text)["choices"][0]["text"]
        self.assertEqual(answers["kernel"], answers["user"])
        status, text = self.http("POST", "/v1/completions", {"prompt": "x", "driver": "both"})
        self.assertEqual(status, 400, text)
        self.assertIn("driver", text)
        self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.generate, token_ids=ids, driver=7,
                         contains="driver")

    def test_speculative_default_follows_a_reload(self):
        ids = self.tokenize("a b c d a b c d a b c d a b c d a b")
        stopping = pb.StoppingCriteria(max_new_tokens=24, ignore_eos=True)
        try:
            self.reload_with(speculative="off")
            off = self.generate(token_ids=ids, stopping=stopping)
            self.assertEqual(off[-1].usage.speculative_draft_tokens, 0)  # the new default applies
            on = self.generate(token_ids=ids, stopping=stopping, speculative=pb.SPECULATIVE_ON)
            self.assertGreater(on[-1].usage.speculative_draft_tokens, 0)  # a request still overrides it
            self.assertEqual([m.token_id for m in on], [m.token_id for m in off])
            self.reload_with(speculative="on")
            self.assertGreater(self.generate(token_ids=ids, stopping=stopping)[-1].usage.speculative_draft_tokens, 0)
        finally:
            self.write_config(log_level="info")
            self.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)

    def test_speculative_stops_and_sessions_stay_in_step(self):
        ids = self.tokenize("x y z x y z x y z x y z x y")
        free = self.generate(token_ids=ids, stopping=pb.StoppingCriteria(max_new_tokens=30, ignore_eos=True),
                             speculative=pb.SPECULATIVE_OFF)
        tokens = [m.token_id for m in free[:-1]]
        # A stop token late in the output, likely inside an accepted draft.
        stop_id = tokens[20]
        first = tokens.index(stop_id)
        for mode in (pb.SPECULATIVE_OFF, pb.SPECULATIVE_ON):
            sid = self.stub.CreateSession(pb.CreateSessionRequest(max_context=128), timeout=30).session.session_id
            msgs = self.generate(token_ids=ids, session_id=sid, speculative=mode,
                                 stopping=pb.StoppingCriteria(max_new_tokens=30, stop_token_ids=[stop_id]))
            self.assertEqual([m.token_id for m in msgs[:-1]], tokens[:first + 1], mode)
            self.assertEqual(msgs[-1].finish_reason, pb.FINISH_REASON_EOS)
            info = self.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=5).session
            # The cache holds the prompt and every token but the last, not the drafts past the stop.
            self.assertEqual(info.history_tokens, len(ids) + first + 1)
            self.assertEqual(info.positions, info.history_tokens - 1)
            # Continuing the session gives what a fresh computation gives.
            more = self.generate(token_ids=[], session_id=sid, history_mode=pb.HISTORY_MODE_APPEND, speculative=mode,
                                 stopping=pb.StoppingCriteria(max_new_tokens=12, ignore_eos=True))
            whole = ids + tokens[:first + 1]
            fresh = self.generate(token_ids=whole, speculative=pb.SPECULATIVE_OFF,
                                  stopping=pb.StoppingCriteria(max_new_tokens=12, ignore_eos=True))
            self.assertEqual([m.token_id for m in more[:-1]], [m.token_id for m in fresh[:-1]])
            self.assertEqual(more[-1].usage.cached_tokens, len(whole) - 1)
            self.stub.DeleteSession(pb.DeleteSessionRequest(session_id=sid), timeout=5)

    def test_cancellation_mid_stream(self):
        sid = self.stub.CreateSession(pb.CreateSessionRequest(max_context=512), timeout=30).session.session_id
        before = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5).requests.cancelled
        call = self.stub.Generate(pb.GenerateRequest(prompt="Go on forever:", session_id=sid,
                                                     stopping=pb.StoppingCriteria(max_new_tokens=400, ignore_eos=True)),
                                  timeout=120)
        got = 0
        for m in call:
            got += 1
            if got == 3:
                call.cancel()
                break
        # The daemon notices within a step: the session is released, far short of 400 tokens.
        self.wait_until(lambda: not self.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=5).session.busy,
                        10, "the cancelled session to become idle")
        info = self.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=5).session
        self.assertLess(info.history_tokens - len(self.tokenize("Go on forever:")), 100)
        self.wait_until(lambda: self.stub.GetStatus(pb.GetStatusRequest(), timeout=5).requests.cancelled > before,
                        10, "the cancelled counter")

    def test_concurrent_clients_get_the_sequential_answers(self):
        prompts = ["alpha beta", "gamma delta epsilon", "zeta", "eta theta iota kappa"]
        expected = {p: [m.token_id for m in self.generate(prompt=p)[:-1]] for p in prompts}
        results, errors = {}, []

        def worker(p):
            try:
                results[p] = [m.token_id for m in self.generate(prompt=p)[:-1]]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(p,)) for p in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(results, expected)

    def test_errors(self):
        code = grpc.StatusCode
        # INVALID_ARGUMENT
        d = self.assert_code(code.INVALID_ARGUMENT, self.stub.Forward, pb.ForwardRequest(token_ids=[1, self.vocab]))
        self.assertIn(str(self.vocab), d)
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Generate, pb.GenerateRequest(), contains="empty")
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Forward, pb.ForwardRequest(), contains="empty")
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Detokenize, pb.DetokenizeRequest(ids=[-5]))
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Generate,
                         pb.GenerateRequest(prompt="x", sampling=pb.SamplingParams(temperature=-1)),
                         contains="temperature")
        sid = self.stub.CreateSession(pb.CreateSessionRequest(max_context=8), timeout=30).session.session_id
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Generate,
                         pb.GenerateRequest(token_ids=list(range(100, 120)), session_id=sid), contains="context")
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Forward,
                         pb.ForwardRequest(token_ids=[5] * (MAX_CONTEXT + 1)), contains="context")
        self.assert_code(code.INVALID_ARGUMENT, self.stub.CreateSession,
                         pb.CreateSessionRequest(max_context=MAX_CONTEXT + 1), contains="max_context")
        self.assert_code(code.INVALID_ARGUMENT, self.stub.CreateSession,
                         pb.CreateSessionRequest(session_id="bad id!"))
        # Invalid UTF-8 never reaches the model: a hand-made TokenizeRequest with bytes 0xff 0xfe as text.
        raw = self.channel.unary_unary("/qwen3bpf.v1.Qwen3Bpf/Tokenize",
                                       request_serializer=lambda b: b,
                                       response_deserializer=pb.TokenizeResponse.FromString)
        with self.assertRaises(grpc.RpcError) as cm:
            raw(b"\x0a\x02\xff\xfe", timeout=5)
        self.assertEqual(cm.exception.code(), code.INVALID_ARGUMENT)
        self.assertIn("TokenizeRequest.text", cm.exception.details())
        # ... and in a nested field of a streaming call: messages[0].content = b"\xc3\x28".
        inner = b"\x0a\x04user\x12\x02\xc3\x28"
        raw_gen = self.channel.unary_stream("/qwen3bpf.v1.Qwen3Bpf/Generate", request_serializer=lambda b: b,
                                            response_deserializer=pb.GenerateResponse.FromString)
        with self.assertRaises(grpc.RpcError) as cm:
            list(raw_gen(b"\x1a" + bytes([len(inner)]) + inner, timeout=5))
        self.assertEqual(cm.exception.code(), code.INVALID_ARGUMENT)
        self.assertIn("ChatMessage.content", cm.exception.details())
        # NOT_FOUND
        self.assert_code(code.NOT_FOUND, self.stub.GetSession, pb.GetSessionRequest(session_id="nope"))
        self.assert_code(code.NOT_FOUND, self.stub.DeleteSession, pb.DeleteSessionRequest(session_id="nope"))
        self.assert_code(code.NOT_FOUND, self.stub.Generate, pb.GenerateRequest(prompt="x", session_id="nope"),
                         contains="unknown session")
        # RESOURCE_EXHAUSTED: one session larger than the whole KV budget.
        probe = self.stub.CreateSession(pb.CreateSessionRequest(max_context=64), timeout=30).session
        per_position = probe.memory_bytes / 64
        too_many = int(KV_BUDGET_MIB * 1024 * 1024 / per_position) + 1
        self.assertLessEqual(too_many, MAX_CONTEXT, "test configuration: the budget must bind before max_context")
        self.assert_code(code.RESOURCE_EXHAUSTED, self.stub.CreateSession,
                         pb.CreateSessionRequest(max_context=too_many), contains="kv_budget_mib")

    def test_session_busy_and_limit(self):
        code = grpc.StatusCode
        sids = [self.stub.CreateSession(pb.CreateSessionRequest(max_context=512), timeout=30).session.session_id
                for _ in range(4)]
        calls = []
        for sid in sids:
            call = self.stub.Generate(pb.GenerateRequest(prompt="Keep going", session_id=sid,
                                                         stopping=pb.StoppingCriteria(max_new_tokens=400,
                                                                                      ignore_eos=True)),
                                      timeout=120)
            next(call)  # running now
            calls.append(call)
        try:
            self.assert_code(code.FAILED_PRECONDITION, self.stub.Generate,
                             pb.GenerateRequest(prompt="x", session_id=sids[0]), contains="session busy")
            # All four (max_sessions) are busy: nothing can be evicted.
            self.assert_code(code.RESOURCE_EXHAUSTED, self.stub.CreateSession, pb.CreateSessionRequest(max_context=16),
                             contains="max_sessions")
        finally:
            for c in calls:
                c.cancel()
        for sid in sids:
            self.wait_until(lambda s=sid: not self.stub.GetSession(pb.GetSessionRequest(session_id=s),
                                                                   timeout=5).session.busy, 10, "idle sessions")
        # Idle now: a fifth session evicts the least recently used one.
        self.stub.GetSession(pb.GetSessionRequest(session_id=sids[0]), timeout=5)
        new = self.stub.CreateSession(pb.CreateSessionRequest(max_context=16), timeout=30).session.session_id
        left = {s.session_id for s in self.stub.ListSessions(pb.ListSessionsRequest(), timeout=5).sessions}
        self.assertIn(new, left)
        self.assertEqual(len(left), 4)

    def test_delete_session_frees_kernel_memory(self):
        before_status = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        maps_before = bpf_maps_of(self.proc.pid) if BACKEND == "bpf" else set()
        sid = self.stub.CreateSession(pb.CreateSessionRequest(max_context=64), timeout=30).session.session_id
        self.generate(prompt="fill the cache", session_id=sid)
        during = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        self.assertGreater(during.memory.kv_bytes, before_status.memory.kv_bytes)
        if BACKEND == "bpf":
            maps_during = bpf_maps_of(self.proc.pid)
            self.assertGreater(len(maps_during), len(maps_before))
        freed = self.stub.DeleteSession(pb.DeleteSessionRequest(session_id=sid), timeout=10).freed_bytes
        self.assertGreater(freed, 0)
        after = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        self.assertEqual(after.memory.kv_bytes, before_status.memory.kv_bytes)
        if BACKEND == "bpf":
            self.wait_until(lambda: bpf_maps_of(self.proc.pid) == maps_before, 5, "the session's maps to be freed")
        # Ephemeral requests leave nothing behind either.
        self.generate(prompt="ephemeral")
        self.assertEqual(self.stub.GetStatus(pb.GetStatusRequest(), timeout=5).memory.kv_bytes,
                         before_status.memory.kv_bytes)
        if BACKEND == "bpf":
            self.assertEqual(bpf_maps_of(self.proc.pid), maps_before)

    def test_unknown_enums_malformed_messages_and_quoted_ids(self):
        code = grpc.StatusCode
        # Issue 14: history_mode = 99 behaved as FULL.
        ids = self.tokenize("enum check")
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Generate,
                         pb.GenerateRequest(token_ids=ids, history_mode=99), contains="history_mode 99")
        self.assert_code(code.INVALID_ARGUMENT, self.stub.Forward,
                         pb.ForwardRequest(token_ids=ids, history_mode=99), contains="history_mode 99")
        # Issue 14: bytes that are no protobuf at all got INTERNAL.
        raw = self.channel.unary_unary("/qwen3bpf.v1.Qwen3Bpf/Tokenize", request_serializer=lambda b: b,
                                       response_deserializer=pb.TokenizeResponse.FromString)
        raw_gen = self.channel.unary_stream("/qwen3bpf.v1.Qwen3Bpf/Generate", request_serializer=lambda b: b,
                                            response_deserializer=pb.GenerateResponse.FromString)
        for junk in (b"\x0a\xff", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0f"):
            with self.assertRaises(grpc.RpcError) as cm:
                raw(junk, timeout=5)
            self.assertEqual(cm.exception.code(), code.INVALID_ARGUMENT, cm.exception.details())
            with self.assertRaises(grpc.RpcError) as cm:
                list(raw_gen(junk, timeout=5))
            self.assertEqual(cm.exception.code(), code.INVALID_ARGUMENT, cm.exception.details())
        # Issue 14: session ids with NUL bytes or 4 KB of text were echoed raw.
        for sid in ("ab\x00cd\x01", "A" * 4096, "\u00e9\x00" * 300):
            for call in (lambda: self.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=5),
                         lambda: self.stub.DeleteSession(pb.DeleteSessionRequest(session_id=sid), timeout=5),
                         lambda: list(self.stub.Generate(pb.GenerateRequest(prompt="x", session_id=sid), timeout=5)),
                         lambda: self.stub.Forward(pb.ForwardRequest(text="x", session_id=sid), timeout=5)):
                with self.assertRaises(grpc.RpcError) as cm:
                    call()
                d = cm.exception.details()
                self.assertEqual(cm.exception.code(), code.NOT_FOUND, d)
                self.assertLess(len(d), 220, d)
                self.assertNotIn("\x00", d)
                self.assertNotIn("\x01", d)
        d = self.assert_code(code.INVALID_ARGUMENT, self.stub.Generate,
                             pb.GenerateRequest(messages=[pb.ChatMessage(role="x\x00" * 2000, content="hi")]))
        self.assertLess(len(d), 220, d)
        self.assertNotIn("\x00", d)

    def test_short_request_keeps_its_pace_beside_a_long_prefill(self):
        # Issue 14: an 8,000-token Forward with all positions made a concurrent
        # 32-token Generate take 18.6 s instead of 0.4 s. Compared in one run, in
        # adjacent pairs (the machine's load drifts): the short request alone,
        # then while a long all-positions Forward runs (cancelled after); the
        # median of five pairs' ratios must stay within 3x.
        short = dict(prompt="A short question", stopping=pb.StoppingCriteria(max_new_tokens=32, ignore_eos=True))

        def timed():
            t = time.monotonic()
            msgs = self.generate(timeout=300, **short)
            self.assertEqual(msgs[-1].usage.completion_tokens, 32)
            return time.monotonic() - t
        timed()  # warm
        long_ids = [(i * 7919) % 150000 + 10 for i in range(1200)]
        ratios = []
        for _ in range(5):
            solo = timed()
            call = self.stub.Forward.future(pb.ForwardRequest(token_ids=long_ids, all_positions=True), timeout=600)
            time.sleep(0.5)  # the prefill is under way
            self.assertFalse(call.done(), "the long Forward ended before the short request started")
            mixed = timed()
            self.assertFalse(call.done(), "the long Forward ended before the short request: nothing was compared")
            call.cancel()
            ratios.append(mixed / solo)
            print(f"\nshort request: {solo:.3f} s alone, {mixed:.3f} s beside a {len(long_ids)}-token prefill "
                  f"({mixed / solo:.2f}x)", file=sys.stderr)
            # The cancelled Forward is gone within a step: its ephemeral KV is freed.
            self.wait_until(lambda: self.stub.GetStatus(pb.GetStatusRequest(), timeout=5).memory.kv_bytes == 0, 30,
                            "the cancelled Forward's KV to be freed")
        self.assertLess(sorted(ratios)[2], 3.0, ratios)

    def test_zz_sigterm_cancels_streams_and_exits_zero(self):
        # Runs last (alphabetical order): stops the daemon, then restarts it to
        # see the saved session come back.
        keep_ids = self.tokenize("A session that survives a restart")
        self.stub.CreateSession(pb.CreateSessionRequest(max_context=64, session_id="keep"), timeout=30)
        self.generate(token_ids=keep_ids, session_id="keep")
        kept = self.stub.GetSession(pb.GetSessionRequest(session_id="keep"), timeout=5).session
        call = self.stub.Generate(pb.GenerateRequest(prompt="long story",
                                                     stopping=pb.StoppingCriteria(max_new_tokens=400, ignore_eos=True)),
                                  timeout=60)
        first = next(call)
        self.assertGreaterEqual(first.token_id, 0)
        self.proc.send_signal(signal.SIGTERM)
        rest = list(call)
        self.assertEqual(rest[-1].finish_reason, pb.FINISH_REASON_CANCELLED)
        self.assertLess(rest[-1].usage.completion_tokens, 400)
        self.assertEqual(self.proc.wait(30), 0)
        self.assertTrue(self.notify.wait_for("STOPPING=1", 5))
        self.assertFalse(os.path.exists(self.socket_path))
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "state", "sessions.json")))

        # Restart: the session is recomputed from its saved tokens.
        with open(self.log_path, "a") as log:
            second = subprocess.Popen([DAEMON, "--config", self.config_path], stdout=log, stderr=subprocess.STDOUT)
        try:
            self.wait_until(lambda: os.path.exists(self.socket_path), 30, "the restarted daemon's socket")
            channel = grpc.insecure_channel("unix:" + self.socket_path)
            stub = pb_grpc.Qwen3BpfStub(channel)

            def restored():
                try:
                    s = stub.GetSession(pb.GetSessionRequest(session_id="keep"), timeout=5).session
                    return not s.busy
                except grpc.RpcError:
                    return False
            self.wait_until(restored, 120, "the saved session to be restored")
            again = stub.GetSession(pb.GetSessionRequest(session_id="keep"), timeout=5).session
            self.assertEqual(again.positions, kept.positions)
            self.assertEqual(again.history_tokens, kept.history_tokens)
            cont = list(stub.Generate(pb.GenerateRequest(token_ids=self.tokenize(" more"), session_id="keep",
                                                         history_mode=pb.HISTORY_MODE_APPEND,
                                                         stopping=pb.StoppingCriteria(max_new_tokens=2,
                                                                                      ignore_eos=True)),
                                      timeout=60))
            self.assertEqual(cont[-1].usage.cached_tokens, kept.positions)
            channel.close()
        finally:
            second.send_signal(signal.SIGTERM)
            self.assertEqual(second.wait(30), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
