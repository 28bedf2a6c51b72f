// The inference core's parts that need no model: prefix reuse, sampling defaults, metrics, stop strings,
// the sessions file, verify slots and config, over a fake backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "sampling/speculative.h"
#include "service/config.h"
#include "service/inference.h"
#include "service/metrics.h"
#include "service/session_store.h"
#include "service/stop_matcher.h"
#include "service/verify_slots.h"
#include "sessions/session_manager.h"
#include "fake_backend.h"

namespace qwen3 {
namespace {

using testing::FakeBackend;
using testing::FakeKv;
using testing::limits;

// ------------------------------------------------------------- prefix reuse

TEST(ReusablePrefix, KeepsCommonCachedPrefixAndFeedsAtLeastOneToken) {
  const std::vector<int32_t> history = {1, 2, 3, 4, 5};
  EXPECT_EQ(reusable_prefix(history, 5, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}), 5);
  EXPECT_EQ(reusable_prefix(history, 4, std::vector<int32_t>{1, 2, 3, 4, 5, 6}), 4);  // last token not cached
  EXPECT_EQ(reusable_prefix(history, 5, std::vector<int32_t>{1, 2, 9, 4}), 2);        // diverges
  EXPECT_EQ(reusable_prefix(history, 5, std::vector<int32_t>{1, 2, 3}), 2);           // identical: recompute the last
  EXPECT_EQ(reusable_prefix(history, 5, std::vector<int32_t>{7}), 0);
  EXPECT_EQ(reusable_prefix({}, 0, std::vector<int32_t>{1, 2}), 0);
}

// ------------------------------------------------------------- stop strings

// Issue 12: generation_config.json defaults were parsed and never applied.
TEST(ResolveSampling, UnsetFieldsTakeTheModelsGenerationConfig) {
  ModelConfig qwen;
  qwen.default_temperature = 0.6;
  qwen.default_top_k = 20;
  qwen.default_top_p = 0.95;
  const ResolvedSampling none = resolve_sampling({}, qwen);
  EXPECT_FLOAT_EQ(none.params.temperature, 0.6f);
  EXPECT_EQ(none.params.top_k, 20);
  EXPECT_FLOAT_EQ(none.params.top_p, 0.95f);
  EXPECT_FLOAT_EQ(none.params.min_p, 0.0f);
  EXPECT_FLOAT_EQ(none.params.repetition_penalty, 1.0f);
  EXPECT_TRUE(none.random_seed);

  SamplingRequest greedy;
  greedy.temperature = 0.0f;
  const ResolvedSampling g = resolve_sampling(greedy, qwen);
  EXPECT_FLOAT_EQ(g.params.temperature, 0.0f);
  EXPECT_FALSE(g.random_seed);

  SamplingRequest some;
  some.temperature = 1.2f;
  some.seed = 7;
  some.top_p = 0.0f;  // 0 = no cut, as the gRPC API documents
  const ResolvedSampling s = resolve_sampling(some, qwen);
  EXPECT_FLOAT_EQ(s.params.temperature, 1.2f);
  EXPECT_EQ(s.params.top_k, 20);  // still the model's
  EXPECT_FLOAT_EQ(s.params.top_p, 1.0f);
  EXPECT_EQ(s.params.seed, 7u);
  EXPECT_FALSE(s.random_seed);

  // A model without generation_config decodes greedily.
  const ResolvedSampling plain = resolve_sampling({}, ModelConfig{});
  EXPECT_FLOAT_EQ(plain.params.temperature, 0.0f);
  EXPECT_FLOAT_EQ(plain.params.top_p, 1.0f);
  EXPECT_FALSE(plain.random_seed);
}

TEST(Metrics, HistogramBucketsAreCumulativeAndLabelsEscaped) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7);
  const auto snap = h.snapshot();
  EXPECT_EQ(snap.cumulative, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(snap.count, 4u);
  EXPECT_DOUBLE_EQ(snap.sum, 7.65);
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  ServiceMetrics m;
  m.count_request("http", "/v1/x\"y", "200");
  const std::string text = m.render({});
  EXPECT_NE(text.find("qwen3_bpfd_requests_total{api=\"http\",endpoint=\"/v1/x\\\"y\",status=\"200\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("qwen3_bpfd_time_to_first_token_seconds_bucket{le=\"+Inf\"} 0\n"), std::string::npos);
}

TEST(StopMatcher, HoldsBackPossibleStartsAndCutsAtTheMatch) {
  StopMatcher m({"STOP", "\n\n"});
  auto a = m.push("hello ST");
  EXPECT_EQ(a.release, "hello ");  // "ST" may start "STOP"
  EXPECT_FALSE(a.stopped);
  auto b = m.push("AR");
  EXPECT_EQ(b.release, "STAR");  // no longer a prefix
  auto c = m.push(" end\n");
  EXPECT_EQ(c.release, " end");
  auto d = m.push("\nmore");
  EXPECT_TRUE(d.stopped);
  EXPECT_EQ(d.release, "");
  EXPECT_EQ(d.matched, "\n\n");
}

TEST(StopMatcher, MatchAcrossPiecesAndEarliestWins) {
  StopMatcher m({"cd", "bcd"});
  EXPECT_EQ(m.push("a").release, "a");
  auto r = m.push("bc");
  EXPECT_EQ(r.release, "");  // "bc" may start "bcd"
  auto s = m.push("de");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.matched, "bcd");
  EXPECT_EQ(s.release, "");
}

TEST(StopMatcher, FlushReleasesHeldTextAndNoStopsPassThrough) {
  StopMatcher m({"xyz"});
  EXPECT_EQ(m.push("abcx").release, "abc");
  EXPECT_EQ(m.flush(), "x");
  StopMatcher none({});
  EXPECT_EQ(none.push("anything").release, "anything");
}

// ------------------------------------------------------------- the sessions file

struct ScratchDir {
  std::filesystem::path dir;
  ScratchDir() {
    char tmpl[] = "/tmp/qwen3-sessions-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~ScratchDir() { std::filesystem::remove_all(dir); }
  std::string file() const { return (dir / "sessions.json").string(); }
  void write(const std::string& text) const { std::ofstream(file(), std::ios::binary) << text; }
  std::string read(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<std::string> moved_aside() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind("sessions.json.bad-", 0) == 0) out.push_back(e.path().string());
    return out;
  }
};

// Issue 14: sessions.json holding valid JSON of the wrong type ([] / null / 42)
// aborted the daemon with an uncaught type_error (value() outside the try
// block), and the kept file restart-looped it. Every shape is now logged,
// moved aside and survived.
TEST(SessionStore, DamagedFilesAreMovedAsideAndNeverThrow) {
  const std::vector<std::string> shapes = {
      "[]", "null", "42", "\"sessions\"", "true", "{}", "{\"sessions\": 5}", "{\"sessions\": null}",
      "{\"sessions\": {\"id\": \"x\"}}", "not json at all", "{\"sessions\": [", "", std::string("\x00\x01\xff", 3)};
  for (const auto& shape : shapes) {
    SCOPED_TRACE("file: " + shape);
    ScratchDir d;
    d.write(shape);
    FakeBackend backend;
    SessionManager m(backend, limits(4, 1 << 20));
    Scheduler sched(backend);
    SessionStore store(d.file());
    int restored = -1;
    EXPECT_NO_THROW(restored = restore_sessions(store, m, sched, 100, [] { return false; }));
    EXPECT_EQ(restored, 0);
    EXPECT_EQ(m.totals().sessions, 0);
    const auto aside = d.moved_aside();
    ASSERT_EQ(aside.size(), 1u);
    EXPECT_EQ(store.moved_aside(), aside[0]);
    EXPECT_EQ(d.read(aside[0]), shape);  // kept as it was, for a look
    // What is in place now is a valid, empty sessions file.
    const auto now = nlohmann::json::parse(d.read(d.file()));
    EXPECT_TRUE(now.at("sessions").is_array());
    EXPECT_TRUE(now.at("sessions").empty());
    // The next start finds nothing wrong.
    SessionStore again(d.file());
    EXPECT_TRUE(again.load(100).empty());
    EXPECT_EQ(again.moved_aside(), "");
  }
}

TEST(SessionStore, BadEntriesAreSkippedAndTheGoodOnesRestored) {
  ScratchDir d;
  d.write(R"({"version": 2, "sessions": [
      1, null, [], "s",
      {"id": "good", "owner_uid": 1000, "max_context": 16, "positions": 2, "history": [1, 2, 3]},
      {"id": "bad id!", "max_context": 16, "positions": 0, "history": []},
      {"id": 7, "max_context": 16, "positions": 0, "history": []},
      {"id": "negpos", "max_context": 16, "positions": -1, "history": []},
      {"id": "toolong", "max_context": 2, "positions": 0, "history": [1, 2, 3]},
      {"id": "hugectx", "max_context": 1e300, "positions": 0, "history": []},
      {"id": "bigint", "max_context": 18446744073709551615, "positions": 0, "history": []},
      {"id": "token", "max_context": 16, "positions": 1, "history": [100]},
      {"id": "negtoken", "max_context": 16, "positions": 1, "history": [-1]},
      {"id": "floattoken", "max_context": 16, "positions": 1, "history": [1.5]},
      {"id": "posgt", "max_context": 16, "positions": 3, "history": [1]},
      {"id": "badowner", "owner_uid": -3, "max_context": 16, "positions": 0, "history": []},
      {"id": "nohistory", "max_context": 16, "positions": 0},
      {"id": "good", "max_context": 16, "positions": 0, "history": []},
      {"id": "v1", "max_context": 8, "positions": 1, "history": [4, 5]}
  ]})");
  FakeBackend backend;
  SessionManager m(backend, limits(8, 1 << 20));
  Scheduler sched(backend);
  SessionStore store(d.file());
  int restored = -1;
  EXPECT_NO_THROW(restored = restore_sessions(store, m, sched, 100, [] { return false; }));
  EXPECT_EQ(restored, 2);  // "good" (its duplicate is refused) and "v1"
  const auto good = m.get("good");
  EXPECT_EQ(good.positions, 2);
  EXPECT_EQ(good.history_tokens, 3);
  EXPECT_EQ(good.owner_uid, 1000u);
  EXPECT_FALSE(good.busy);
  EXPECT_EQ(m.get("v1").owner_uid, 0u);  // no owner recorded: root's
  EXPECT_EQ(m.totals().sessions, 2);
  ASSERT_EQ(d.moved_aside().size(), 1u);
  // The file in place holds the restored two.
  const auto now = nlohmann::json::parse(d.read(d.file()));
  ASSERT_EQ(now.at("sessions").size(), 2u);
}

// Issue 14: sessions were saved only at SIGTERM/SIGINT, so a kill -9 lost all
// of them. Every committed change is on disk when the call that made it
// returns; a request in flight leaves the previous state on disk.
TEST(SessionStore, EveryCommittedChangeIsOnDiskAtOnce) {
  ScratchDir d;
  FakeBackend backend;
  auto m = std::make_unique<SessionManager>(backend, limits(8, 1 << 20));
  Scheduler sched(backend);
  SessionStore store(d.file());
  m->set_on_change([&] { store.save(*m); });
  auto on_disk = [&] {
    std::map<std::string, std::pair<int, std::vector<int32_t>>> out;
    const auto doc = nlohmann::json::parse(d.read(d.file()));
    for (const auto& e : doc.at("sessions"))
      out[e.at("id").get<std::string>()] = {e.at("positions").get<int>(), e.at("history").get<std::vector<int32_t>>()};
    return out;
  };
  m->create(32, "a", 1000);
  EXPECT_EQ(on_disk().count("a"), 1u);  // created: on disk already
  const std::vector<int32_t> prompt = {5, 6, 7, 8};
  {
    auto lease = m->acquire("a", 1000);
    sched.run(*lease->kv, prompt, {});
    lease->history = prompt;
    lease->history.push_back(9);  // a generated token, not fed
    // In flight: the disk still has the state before the request.
    EXPECT_EQ(on_disk()["a"].second, std::vector<int32_t>{});
  }
  EXPECT_EQ(on_disk()["a"], std::make_pair(4, std::vector<int32_t>{5, 6, 7, 8, 9}));
  // A request in flight when the process dies: simulated by reading the file
  // while the lease is held, then "crashing" (dropping everything unsaved).
  auto lease = m->acquire("a", 1000);
  lease->kv->truncate(2);
  lease->history.resize(2);
  const std::string at_crash = d.read(d.file());
  EXPECT_FALSE(std::filesystem::exists(d.file() + ".tmp"));
  m->create(8, "b");
  m->remove("b");
  EXPECT_EQ(on_disk().count("b"), 0u);
  EXPECT_EQ(on_disk()["a"].second, (std::vector<int32_t>{5, 6, 7, 8, 9}));  // still the committed state
  d.write(at_crash);
  // The restart: a new table restores "a" as of its last finished request, with its owner.
  FakeBackend backend2;
  SessionManager m2(backend2, limits(8, 1 << 20));
  Scheduler sched2(backend2);
  SessionStore store2(d.file());
  EXPECT_EQ(restore_sessions(store2, m2, sched2, 100, [] { return false; }), 1);
  const auto a = m2.get("a");
  EXPECT_EQ(a.positions, 4);
  EXPECT_EQ(a.history_tokens, 5);
  EXPECT_EQ(a.owner_uid, 1000u);
  auto l2 = m2.acquire("a", 1000);
  EXPECT_EQ(static_cast<FakeKv&>(*l2->kv).tokens, prompt);  // the KV was recomputed from the saved tokens
  EXPECT_EQ(d.moved_aside().size(), 0u);
  lease.release();
  m->set_on_change({});
}

// A save while sessions are still being restored keeps the ones not yet
// recomputed (they are in the table, busy, with their saved state).
TEST(SessionStore, SavesDuringARestoreKeepThePendingSessions) {
  ScratchDir d;
  d.write(R"({"version": 2, "sessions": [
      {"id": "p1", "max_context": 16, "positions": 2, "history": [1, 2]},
      {"id": "p2", "max_context": 16, "positions": 3, "history": [3, 4, 5]}]})");
  FakeBackend backend;
  SessionManager m(backend, limits(8, 1 << 20));
  SessionStore store(d.file());
  auto pending = begin_restore(store, m, 100);
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_TRUE(m.get("p1").busy);
  m.create(8, "new");
  store.save(m);
  auto doc = nlohmann::json::parse(d.read(d.file()));
  EXPECT_EQ(doc.at("sessions").size(), 3u);
  // Stopping before they were recomputed: they stay on disk as they were.
  Scheduler sched(backend);
  EXPECT_EQ(finish_restore(pending, d.file(), m, sched, [] { return true; }), 0);
  store.save(m);
  doc = nlohmann::json::parse(d.read(d.file()));
  ASSERT_EQ(doc.at("sessions").size(), 3u);
  for (const auto& e : doc.at("sessions"))
    if (e.at("id") == "p2") {
      EXPECT_EQ(e.at("history").get<std::vector<int32_t>>(), (std::vector<int32_t>{3, 4, 5}));
    }
}

// ------------------------------------------------------------- verify slots

TEST(VerifySlots, QueueThenGiveUpOrCancel) {
  VerifySlots slots(1);
  auto first = slots.acquire(std::chrono::milliseconds(10), {});
  EXPECT_EQ(slots.running(), 1);
  try {
    slots.acquire(std::chrono::milliseconds(150), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
  }
  try {
    slots.acquire(std::chrono::seconds(10), [] { return true; });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable);
  }
  std::thread releaser([held = std::move(first)]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto gone = std::move(held);
  });
  auto second = slots.acquire(std::chrono::seconds(5), {});  // waits for the release
  EXPECT_EQ(slots.running(), 1);
  releaser.join();
}

// ------------------------------------------------------------- config

TEST(Config, KvBitsIsEightOrSixteen) {
  DaemonConfig c;
  EXPECT_EQ(c.kv_bits, 8);  // compact K/V is the default (issue 10)
  set_config_value(c, "kv_bits", "16", "test.conf:1");
  EXPECT_EQ(c.kv_bits, 16);
  EXPECT_EQ(describe_config(c).at("kv_bits"), "16");
  try {
    set_config_value(c, "kv_bits", "4", "test.conf:2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.conf:2: kv_bits must be one of 8|16"), std::string::npos);
  }
  EXPECT_EQ(c.kv_bits, 16);
}

TEST(Config, SpeculativeIsAutoOnOrOff) {
  DaemonConfig c;
  EXPECT_FALSE(c.speculative.has_value());  // auto by default: on where it pays (issue 11)
  EXPECT_EQ(describe_config(c).at("speculative"), "auto");
  set_config_value(c, "speculative", "off", "test.conf:1");
  EXPECT_EQ(c.speculative, std::optional<bool>(false));
  EXPECT_EQ(describe_config(c).at("speculative"), "off");
  set_config_value(c, "speculative", "on", "test.conf:2");
  EXPECT_EQ(c.speculative, std::optional<bool>(true));
  try {
    set_config_value(c, "speculative", "maybe", "test.conf:3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.conf:3: speculative must be auto, on or off (got 'maybe')"),
              std::string::npos);
  }
  EXPECT_EQ(c.speculative, std::optional<bool>(true));
  set_config_value(c, "speculative", "auto", "test.conf:4");
  EXPECT_FALSE(c.speculative.has_value());
}

TEST(Speculation, PaysWhereAPassStreamsTheWeightsOnce) {
  // The BPF q8 block kernel costs the same per position in a pass as alone
  // (docs/performance.md), so auto leaves speculation off there.
  EXPECT_FALSE(speculation_pays({.name = "bpf", .precision = "q8"}));
  EXPECT_TRUE(speculation_pays({.name = "bpf", .precision = "q24"}));
  EXPECT_TRUE(speculation_pays({.name = "reference", .precision = "f32"}));
}

TEST(Config, ErrorsNameTheKeyAndLine) {
  DaemonConfig c;
  try {
    set_config_value(c, "precision", "q3", "test.conf:7");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.conf:7: precision must be one of q24|q8|q4"), std::string::npos);
  }
  try {
    set_config_value(c, "max_sesions", "4", "test.conf:9");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'max_sesions'"), std::string::npos);
  }
  EXPECT_THROW(set_config_value(c, "kv_budget_mib", "lots", "x"), Error);
  set_config_value(c, "default_context", "9000", "x");
  EXPECT_THROW(validate_config(c), Error);  // above max_context 8192
  EXPECT_EQ(c.effective_model_dir(), "/var/lib/qwen3-bpfd/models/default");
  EXPECT_TRUE(c.uses_default_model());
}


}  // namespace
}  // namespace qwen3
