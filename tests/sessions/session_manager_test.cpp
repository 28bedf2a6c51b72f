// The session table: limits, LRU eviction, TTL, leases, ownership and per-uid quotas, over a fake backend.
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
#include "sessions/session_manager.h"
#include "fake_backend.h"

namespace qwen3 {
namespace {

using testing::FakeBackend;
using testing::limits;

// ------------------------------------------------------------- sessions


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

}  // namespace
}  // namespace qwen3
