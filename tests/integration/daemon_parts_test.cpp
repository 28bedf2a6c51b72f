// Unit tests of the daemon's parts that need no model: prefix reuse, stop
// strings, the session table (limits, LRU, TTL, leases) and the batching
// scheduler, against a small deterministic fake backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "scheduler/scheduler.h"
#include "sampling/speculative.h"
#include "service/config.h"
#include "service/inference.h"
#include "service/metrics.h"
#include "service/session_store.h"
#include "service/stop_matcher.h"
#include "service/verify_slots.h"
#include "sessions/session_manager.h"

namespace qwen3 {
namespace {

// KV that only counts positions; the logits of a position are a function of the
// tokens so far, so every step is checkable.
class FakeKv : public KvCache {
 public:
  FakeKv(int max_context, std::atomic<int>* live) : max_(max_context), live_(live) { ++*live_; }
  ~FakeKv() override { --*live_; }
  int positions() const override { return static_cast<int>(tokens.size()); }
  int max_context() const override { return max_; }
  size_t bytes() const override { return 0; }  // grows on demand: the manager charges the estimate
  void truncate(int n) override { tokens.resize(n); }
  std::vector<int32_t> tokens;

 private:
  int max_;
  std::atomic<int>* live_;
};

class FakeBackend : public Backend {
 public:
  FakeBackend() {
    config_.num_hidden_layers = 2;
    config_.num_attention_heads = 2;
    config_.num_key_value_heads = 1;
    config_.head_dim = 8;  // 2 layers * 2 (K,V) * 8 * 4 bytes = 128 bytes per position
    config_.vocab_size = 100;
  }
  const ModelConfig& config() const override { return config_; }
  BackendInfo info() const override { return {"fake", "host", "f32"}; }
  std::unique_ptr<KvCache> create_kv(int max_context) override {
    return std::make_unique<FakeKv>(max_context, &live_kv);
  }
  // The next token after a sequence is (sum of its tokens) % vocab.
  static int32_t next_of(const std::vector<int32_t>& seq) {
    int64_t s = 0;
    for (int32_t t : seq) s += t;
    return static_cast<int32_t>(s % 100);
  }
  ForwardResult forward(KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& wants) override {
    auto& fk = static_cast<FakeKv&>(kv);
    for (int32_t t : tokens)
      if (t == fail_on) throw invalid_argument("fake failure on token " + std::to_string(t));
    if (fk.positions() + static_cast<int>(tokens.size()) > fk.max_context()) throw invalid_argument("context overflow");
    ForwardResult r;
    for (size_t i = 0; i < tokens.size(); ++i) {
      fk.tokens.push_back(tokens[i]);
      if (wants.all_positions || i + 1 == tokens.size()) {
        PositionLogits p;
        p.argmax = next_of(fk.tokens);
        p.top_k = {{p.argmax, 1.0f}};
        r.positions.push_back(p);
      }
    }
    if (step_delay.count() > 0) std::this_thread::sleep_for(step_delay);
    return r;
  }
  void forward_batch(std::span<BatchItem> items) override {
    {
      std::lock_guard lock(mu);
      batch_sizes.push_back(static_cast<int>(items.size()));
      std::vector<std::pair<KvCache*, int>> b;
      for (const auto& it : items) b.emplace_back(it.kv, static_cast<int>(it.tokens.size()));
      batches.push_back(std::move(b));
    }
    Backend::forward_batch(items);
  }

  ModelConfig config_;
  std::atomic<int> live_kv{0};
  int32_t fail_on = -1;
  std::chrono::milliseconds step_delay{0};
  std::mutex mu;
  std::vector<int> batch_sizes;
  std::vector<std::vector<std::pair<KvCache*, int>>> batches;  // (cache, tokens) of every item of every step
};

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

// ------------------------------------------------------------- sessions

SessionLimits limits(int max_sessions, size_t budget, int ttl_seconds = 0) {
  SessionLimits l;
  l.max_sessions = max_sessions;
  l.kv_budget_bytes = budget;
  l.ttl = std::chrono::seconds(ttl_seconds);
  l.default_context = 16;
  l.max_context = 64;
  return l;
}

TEST(SessionManager, CreateGetDeleteFreesTheCache) {
  FakeBackend backend;
  SessionManager m(backend, limits(4, 1 << 20));
  const auto s = m.create(32);
  EXPECT_EQ(s.max_context, 32);
  EXPECT_EQ(s.bytes, 32u * 128);  // charged at full size
  EXPECT_EQ(backend.live_kv, 1);
  EXPECT_EQ(m.get(s.id).id, s.id);
  EXPECT_EQ(m.totals().kv_bytes, 32u * 128);
  EXPECT_EQ(m.remove(s.id), 32u * 128);
  EXPECT_EQ(backend.live_kv, 0);
  EXPECT_EQ(m.totals().kv_bytes, 0u);
  try {
    m.get(s.id);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
  }
}

TEST(SessionManager, RejectsBadIdsAndContexts) {
  FakeBackend backend;
  SessionManager m(backend, limits(4, 1 << 20));
  EXPECT_THROW(m.create(16, "has space"), Error);
  EXPECT_THROW(m.create(65), Error);  // over max_context
  m.create(16, "mine");
  try {
    m.create(16, "mine");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::failed_precondition);
  }
}

TEST(SessionManager, BusySessionIsExclusive) {
  FakeBackend backend;
  SessionManager m(backend, limits(4, 1 << 20));
  const auto s = m.create(16);
  {
    auto lease = m.acquire(s.id);
    EXPECT_TRUE(m.get(s.id).busy);
    try {
      m.acquire(s.id);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::failed_precondition);
      EXPECT_NE(std::string(e.what()).find("session busy"), std::string::npos);
    }
  }
  EXPECT_FALSE(m.get(s.id).busy);
  m.acquire(s.id);  // free again
}

TEST(SessionManager, EvictsLeastRecentlyUsedIdleSessionAtTheCountLimit) {
  FakeBackend backend;
  SessionManager m(backend, limits(2, 1 << 20));
  const auto a = m.create(16);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const auto b = m.create(16);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  m.acquire(a.id);  // a is now more recently used than b
  const auto c = m.create(16);
  EXPECT_THROW(m.get(b.id), Error);
  EXPECT_EQ(m.get(a.id).id, a.id);
  EXPECT_EQ(m.get(c.id).id, c.id);
  EXPECT_EQ(m.totals().evicted, 1u);
  EXPECT_EQ(backend.live_kv, 2);
}

TEST(SessionManager, BudgetCountsEphemeralCachesAndBusySessionsAreNeverEvicted) {
  FakeBackend backend;
  SessionManager m(backend, limits(8, 64 * 128));  // room for 64 positions
  const auto a = m.create(32);
  auto lease = m.acquire(a.id);
  auto eph = m.create_ephemeral(32);  // fills the budget
  try {
    m.create(16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
    EXPECT_NE(std::string(e.what()).find("kv_budget_mib"), std::string::npos);
  }
  EXPECT_EQ(backend.live_kv, 2);  // the refused cache was freed
  eph.release();
  EXPECT_EQ(m.totals().kv_bytes, 32u * 128);
  const auto small = m.create(16);  // fits now
  try {
    m.create(64);  // would fit only by evicting the busy session too
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
  }
  EXPECT_EQ(m.get(small.id).id, small.id);  // not evicted in vain
  EXPECT_EQ(m.totals().evicted, 0u);
}

TEST(SessionManager, IdleTtlExpiresAndDeleteWhileBusyFreesAtRelease) {
  FakeBackend backend;
  SessionManager m(backend, limits(8, 1 << 20, 1));
  const auto a = m.create(16);
  const auto b = m.create(16);
  {
    auto lease = m.acquire(b.id);
    EXPECT_EQ(m.remove(b.id), 16u * 128);
    EXPECT_EQ(backend.live_kv, 2);  // still in use by the request
  }
  EXPECT_EQ(backend.live_kv, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(m.expire_idle(), 1);
  EXPECT_EQ(backend.live_kv, 0);
  EXPECT_THROW(m.get(a.id), Error);
}

// ------------------------------------------------------------- ownership

void expect_kind(ErrorKind kind, const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    if (message) *message = e.what();
  }
}

// Issue 14: any member of the client group could list, continue or delete
// root's sessions. A session belongs to its creator's uid; other users cannot
// see, use or delete it (it looks exactly like a missing one); root can.
TEST(SessionManager, SessionsBelongToTheirCreator) {
  FakeBackend backend;
  SessionManager m(backend, limits(8, 1 << 20));
  m.create(16, "alice-1", 1000);
  m.create(16, "bob-1", 2000);
  m.create(16, "root-1", 0);
  auto ids = [](const std::vector<SessionSnapshot>& v) {
    std::vector<std::string> out;
    for (const auto& s : v) out.push_back(s.id);
    return out;
  };
  EXPECT_EQ(ids(m.list(1000)), std::vector<std::string>{"alice-1"});
  EXPECT_EQ(ids(m.list(2000)), std::vector<std::string>{"bob-1"});
  EXPECT_EQ(ids(m.list(0)), (std::vector<std::string>{"alice-1", "bob-1", "root-1"}));
  EXPECT_EQ(m.get("alice-1", 1000).owner_uid, 1000u);
  std::string foreign, missing;
  expect_kind(ErrorKind::not_found, [&] { m.get("alice-1", 2000); }, &foreign);
  expect_kind(ErrorKind::not_found, [&] { m.get("nobody-has-this", 2000); }, &missing);
  EXPECT_EQ(foreign.find("alice-1") != std::string::npos, missing.find("nobody-has-this") != std::string::npos);
  expect_kind(ErrorKind::not_found, [&] { m.acquire("alice-1", 2000); });
  expect_kind(ErrorKind::not_found, [&] { m.remove("alice-1", 2000); });
  expect_kind(ErrorKind::not_found, [&] { m.acquire("root-1", 1000); });
  EXPECT_EQ(m.totals().sessions, 3);  // nothing was deleted
  { auto lease = m.acquire("alice-1", 1000); }
  { auto lease = m.acquire("alice-1", 0); }  // root may use it
  EXPECT_GT(m.remove("bob-1", 2000), 0u);
  EXPECT_GT(m.remove("alice-1", 0), 0u);
  EXPECT_EQ(ids(m.list(0)), std::vector<std::string>{"root-1"});
}

// Issue 22: one uid creating sessions evicted every other uid's idle sessions
// (the LRU was global). Now a uid at its quota evicts its own least recently
// used; under total pressure only the requester's own and over-quota uids'
// sessions go; a uid within its quota keeps its sessions.
TEST(SessionManager, PerUidQuotasEvictTheRequestersOwnSessionsFirst) {
  FakeBackend backend;
  SessionLimits l = limits(6, 1 << 20);
  l.max_sessions_per_uid = 3;
  SessionManager m(backend, l);
  m.create(16, "bob-1", 2000);
  m.create(16, "bob-2", 2000);
  for (int i = 0; i < 70; ++i) m.create(16, "alice-" + std::to_string(i), 1000);
  EXPECT_EQ(m.list(2000).size(), 2u);  // bob within his quota: untouched
  EXPECT_EQ(m.list(1000).size(), 3u);  // alice holds her quota, her newest three
  EXPECT_EQ(m.get("alice-69", 1000).id, "alice-69");
  EXPECT_EQ(m.totals().evicted, 67u);
  // The table full (6): carol, within her quota, may not evict bob's or alice's.
  m.create(16, "carol-1", 3000);
  auto lease1 = m.acquire("carol-1", 3000);  // busy: carol has nothing of her own to evict
  std::string msg;
  expect_kind(ErrorKind::resource_exhausted, [&] { m.create(16, "carol-2", 3000); }, &msg);
  EXPECT_NE(msg.find("max_sessions"), std::string::npos) << msg;
  EXPECT_EQ(m.list(2000).size(), 2u);
  EXPECT_EQ(m.list(1000).size(), 3u);
  // A quota lowered at run time puts alice above it: her sessions may go then, bob's still not.
  l.max_sessions_per_uid = 2;
  m.set_limits(l);
  m.create(16, "carol-2", 3000);
  EXPECT_EQ(m.list(1000).size(), 2u);
  EXPECT_EQ(m.list(2000).size(), 2u);
  // Busy sessions at the quota: refused with the key that sets it.
  auto lease2 = m.acquire("carol-2", 3000);
  expect_kind(ErrorKind::resource_exhausted, [&] { m.create(16, "carol-3", 3000); }, &msg);
  EXPECT_NE(msg.find("max_sessions_per_uid"), std::string::npos) << msg;
}

TEST(SessionManager, PerUidKvBudget) {
  FakeBackend backend;
  SessionLimits l = limits(16, 1 << 20);
  l.kv_budget_bytes_per_uid = 40 * 128;  // 40 positions
  SessionManager m(backend, l);
  std::string msg;
  expect_kind(ErrorKind::resource_exhausted, [&] { m.create(48, "", 1000); }, &msg);
  EXPECT_NE(msg.find("kv_budget_mib_per_uid"), std::string::npos) << msg;
  m.create(32, "bob-1", 2000);
  m.create(16, "alice-1", 1000);
  m.create(16, "alice-2", 1000);
  m.create(16, "alice-3", 1000);  // 48 > 40: her oldest goes
  EXPECT_THROW(m.get("alice-1"), Error);
  EXPECT_EQ(m.list(1000).size(), 2u);
  EXPECT_EQ(m.get("bob-1").id, "bob-1");
  // An ephemeral cache under total pressure evicts its requester's idle sessions only.
  SessionLimits tight = l;
  tight.kv_budget_bytes = 64 * 128;
  m.set_limits(tight);  // 64 positions in use: bob 32, alice 32
  auto eph = m.create_ephemeral(16, 1000);
  EXPECT_EQ(m.get("bob-1").id, "bob-1");
  EXPECT_EQ(m.list(1000).size(), 1u);
  expect_kind(ErrorKind::resource_exhausted, [&] { m.create_ephemeral(48, 3000); });
  EXPECT_EQ(m.get("bob-1").id, "bob-1");
}

// Issue 14: session ids with NUL bytes or 4 KB of text were echoed raw.
TEST(SessionManager, ErrorMessagesQuoteIdsEscapedAndShort) {
  FakeBackend backend;
  SessionManager m(backend, limits(4, 1 << 20));
  const std::string nul_id = std::string("ab\0cd\n\xff", 7);
  const std::string long_id(4096, 'A');
  for (const std::string& id : {nul_id, long_id}) {
    for (int call = 0; call < 3; ++call) {
      std::string msg;
      expect_kind(ErrorKind::not_found, [&] {
        if (call == 0) m.get(id);
        if (call == 1) m.acquire(id);
        if (call == 2) m.remove(id);
      }, &msg);
      EXPECT_LT(msg.size(), 220u) << msg;
      EXPECT_EQ(msg.find('\0'), std::string::npos);
      EXPECT_EQ(msg.find('\n'), std::string::npos);
      EXPECT_EQ(msg.find('\xff'), std::string::npos);
    }
  }
  EXPECT_EQ(printable(nul_id), "ab\\x00cd\\x0a\\xff");
  EXPECT_EQ(printable(long_id), std::string(64, 'A') + "...(4096 bytes)");
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
    if (e.at("id") == "p2") EXPECT_EQ(e.at("history").get<std::vector<int32_t>>(), (std::vector<int32_t>{3, 4, 5}));
}

// ------------------------------------------------------------- scheduler

TEST(Scheduler, ChunkedPrefillReportsEveryPositionInOrder) {
  FakeBackend backend;
  SchedulerOptions o;
  o.prefill_chunk = 3;
  Scheduler sched(backend, o);
  auto kv = backend.create_kv(32);
  std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 10, 11};
  ForwardWants w;
  w.all_positions = true;
  const auto r = sched.run(*kv, tokens, w);
  ASSERT_EQ(r.positions.size(), tokens.size());
  std::vector<int32_t> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    seen.push_back(tokens[i]);
    EXPECT_EQ(r.positions[i].argmax, FakeBackend::next_of(seen)) << "position " << i;
  }
  EXPECT_EQ(kv->positions(), 7);
  EXPECT_EQ(sched.stats().steps, 3u);  // 3 + 3 + 1
}

TEST(Scheduler, ConcurrentSequencesShareSteps) {
  FakeBackend backend;
  backend.step_delay = std::chrono::milliseconds(5);
  SchedulerOptions o;
  o.gather_wait = std::chrono::microseconds(5000);
  Scheduler sched(backend, o);
  constexpr int kClients = 4, kSteps = 20;
  std::vector<std::thread> threads;
  std::vector<std::vector<int32_t>> outputs(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto kv = backend.create_kv(64);
      std::vector<int32_t> seq = {c + 1};
      for (int i = 0; i < kSteps; ++i) {
        const int32_t feed[1] = {seq.back()};
        const auto r = sched.run(*kv, feed, {});
        seq.push_back(r.positions.back().argmax);
      }
      outputs[c] = seq;
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) {
    // Same as computing alone: each step continues its own sequence.
    std::vector<int32_t> expect = {c + 1};
    std::vector<int32_t> fed;
    for (int i = 0; i < kSteps; ++i) {
      fed.push_back(expect.back());
      expect.push_back(FakeBackend::next_of(fed));
    }
    EXPECT_EQ(outputs[c], expect);
  }
  int biggest = 0;
  for (int s : backend.batch_sizes) biggest = std::max(biggest, s);
  EXPECT_GE(biggest, 2) << "steps of different sessions were never batched together";
  EXPECT_LT(backend.batch_sizes.size(), static_cast<size_t>(kClients * kSteps));
}

// Prefills `prefill_tokens` into long_kv on a thread and, once `started`
// positions are in, decodes `decodes` single tokens into short_kv. Returns how
// many decodes finished while the prefill still ran.
int decodes_during_prefill(Scheduler& sched, KvCache& long_kv, KvCache& short_kv, int prefill_tokens,
                           const ForwardWants& wants, int started, int decodes) {
  std::atomic<bool> prefill_done{false};
  std::thread prefill([&] {
    std::vector<int32_t> tokens(prefill_tokens, 7);
    EXPECT_EQ(sched.run(long_kv, tokens, wants).positions.size(), wants.all_positions ? size_t(prefill_tokens) : 1u);
    prefill_done = true;
  });
  while (long_kv.positions() < started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int during = 0;
  for (int i = 0; i < decodes; ++i) {
    const int32_t t[1] = {3};
    sched.run(short_kv, t, {});
    if (!prefill_done) ++during;
  }
  prefill.join();
  EXPECT_EQ(long_kv.positions(), prefill_tokens);
  return during;
}

TEST(Scheduler, LongPrefillDoesNotStallADecodingSession) {
  FakeBackend backend;
  backend.step_delay = std::chrono::milliseconds(2);
  SchedulerOptions o;
  o.prefill_chunk = 8;
  o.max_batch_tokens = 16;
  Scheduler sched(backend, o);
  auto long_kv = backend.create_kv(512);
  auto short_kv = backend.create_kv(64);
  const int during = decodes_during_prefill(sched, *long_kv, *short_kv, 400, {}, 8, 10);  // 50 chunks
  EXPECT_EQ(short_kv->positions(), 10);
  // The decode steps rode along with the prefill chunks instead of waiting for all 50.
  EXPECT_GE(during, 8);
}

// Issue 14: an 8,000-token Forward with all positions made a concurrent
// 32-token Generate take 18.6 s instead of 0.4 s: every step carried a full
// prefill chunk, each position with its vocabulary projection. While a decode
// waits, a long prefill gets half the decode's cost per step: one token every
// other step or so here (one all-positions token costs about a decode step).
// Alone, its steps stay bounded too: an all-positions chunk costs at most
// kMaxStepDecodes decode steps (plain chunks run whole).
TEST(Scheduler, LongPrefillIsPacedWhileADecodeWaits) {
  FakeBackend backend;
  // The tiny test model's shape: the 151936-row vocabulary projection dominates.
  backend.config_.hidden_size = 64;
  backend.config_.num_hidden_layers = 2;
  backend.config_.num_attention_heads = 4;
  backend.config_.num_key_value_heads = 2;
  backend.config_.head_dim = 32;
  backend.config_.intermediate_size = 192;
  backend.config_.vocab_size = 151936;
  backend.step_delay = std::chrono::milliseconds(1);
  SchedulerOptions o;
  o.prefill_chunk = 16;
  o.max_batch_tokens = 64;
  Scheduler sched(backend, o);
  auto long_kv = backend.create_kv(2048);
  auto short_kv = backend.create_kv(64);
  ForwardWants all;
  all.all_positions = true;
  const int during = decodes_during_prefill(sched, *long_kv, *short_kv, 1200, all, 64, 20);
  EXPECT_EQ(during, 20) << "the test needs the decodes to run while the prefill does";
  int decodes = 0, mixed = 0, alone = 0, beside = 0;  // beside: long tokens from the first decode to the last
  for (const auto& b : backend.batches) {
    bool has_decode = false;
    int long_tokens = 0;
    for (const auto& [kv, n] : b) {
      if (kv == short_kv.get()) has_decode = true;
      if (kv == long_kv.get()) long_tokens = n;
    }
    if (decodes > 0 && decodes < 20) beside += long_tokens;
    if (has_decode) {
      ++decodes;
      if (long_tokens > 0) ++mixed;
      EXPECT_LE(long_tokens, 1) << "a long all-positions prefill chunk rode along with a decode";
    } else if (long_tokens > 0) {
      EXPECT_LE(long_tokens, 3) << "an all-positions chunk alone costs at most 4 decode steps here";
      alone += long_tokens == 3;  // (1-token chunks: paced just after a decode)
    }
  }
  EXPECT_EQ(decodes, 20);
  EXPECT_GE(beside, 5) << "the prefill must still advance while the decodes run";
  EXPECT_LE(mixed, 12) << "the prefill took more than its share beside the decodes (half their cost)";
  EXPECT_GE(alone, 4);
  // The model behind the cut: a chunk of n all-positions tokens costs about n
  // decode steps; n tokens of a plain prefill much less (one projection).
  const auto cost = StepCostModel::of(backend.config_);
  const double decode = cost.cost(1, 0, false);
  EXPECT_EQ(cost.fair_chunk(16, 100, true, 0.5 * decode), 0);
  EXPECT_EQ(cost.fair_chunk(16, 100, true, 1.5 * decode), 1);
  EXPECT_EQ(cost.fair_chunk(16, 100, true, 4 * decode), 3);
  EXPECT_GT(cost.fair_chunk(16, 0, false, 1.5 * decode), 4);
  EXPECT_EQ(cost.fair_chunk(16, 0, false, 100 * decode), 16);
  // A plain prefill alone runs whole chunks (the bound is at least a plain chunk's cost).
  EXPECT_EQ(cost.fair_chunk(16, 500, false, std::max(cost.cost(16, 500, false), kMaxStepDecodes * decode)), 16);
}

TEST(Scheduler, CancellationRollsBackAndFailuresAreIsolated) {
  FakeBackend backend;
  SchedulerOptions o;
  o.prefill_chunk = 2;
  Scheduler sched(backend, o);
  auto kv = backend.create_kv(32);
  const std::vector<int32_t> start = {1, 2};
  sched.run(*kv, start, {});
  std::atomic<int> polls{0};
  const std::vector<int32_t> more = {3, 4, 5, 6, 7, 8};
  try {
    sched.run(*kv, more, {}, [&] { return ++polls > 2; });  // cancelled after a chunk or two
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable);
  }
  EXPECT_EQ(kv->positions(), 2);  // rolled back to before the call

  backend.fail_on = 66;
  auto good = backend.create_kv(32);
  auto bad = backend.create_kv(32);
  std::thread t([&] {
    const std::vector<int32_t> toks = {10, 66};
    EXPECT_THROW(sched.run(*bad, toks, {}), Error);
  });
  const std::vector<int32_t> toks = {10, 11};
  const auto r = sched.run(*good, toks, {});
  t.join();
  EXPECT_EQ(r.positions.back().argmax, 21);
  EXPECT_EQ(bad->positions(), 0);
  EXPECT_EQ(good->positions(), 2);
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
    set_config_value(c, "precision", "q4", "test.conf:7");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.conf:7: precision must be one of q24|q8"), std::string::npos);
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
