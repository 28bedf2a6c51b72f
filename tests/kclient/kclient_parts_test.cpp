// The daemon-side parts of kernel clients without a kernel: the user-space
// check of submission records (other BPF programs write the ring without the
// XDP program's validation) and the result slots (claim, reuse, text split
// into entries, the ring never overrun). The BPF side: udp_test.py.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "kclient/request.h"
#include "kclient/result_slots.h"
#include "kclient_abi.h"

namespace qwen3::kclient {
namespace {

qk_submission valid_text(const std::string& prompt) {
  qk_submission r{};
  r.origin = QK_ORIGIN_BPF;
  qk_generate& g = r.data;
  g.hdr.magic = QK_MAGIC;
  g.hdr.version = QK_VERSION;
  g.hdr.kind = QK_GENERATE;
  g.hdr.flags = QK_F_TEXT | QK_F_APPEND;
  g.hdr.request_id = 7;
  std::memcpy(g.hdr.session, "exec-demo", 9);
  g.max_tokens = 16;
  g.prompt_len = static_cast<uint16_t>(prompt.size());
  std::memcpy(g.prompt, prompt.data(), prompt.size());
  g.sampling = {QK_UNSET, QK_UNSET, QK_UNSET, QK_UNSET, QK_UNSET, 0, 0};
  g.sampling.temperature_q16 = 0;
  r.len = QK_GENERATE_FIXED + static_cast<uint32_t>(prompt.size());
  return r;
}

TEST(KernelRequest, ValidRecordsDecodeFieldByField) {
  qk_submission r = valid_text("hello kernel");
  r.data.sampling.top_p_q16 = 58982;  // 0.9
  r.data.sampling.top_k = 20;
  r.data.sampling.seed_set = 1;
  r.data.sampling.seed = 42;
  const KernelRequest k = decode_submission(r, sizeof r);
  EXPECT_EQ(k.session, "exec-demo");
  EXPECT_EQ(k.request_id, 7u);
  EXPECT_TRUE(k.text && k.append);
  EXPECT_EQ(k.prompt_text, "hello kernel");
  EXPECT_EQ(k.max_tokens, 16);
  EXPECT_EQ(k.sampling.temperature.value(), 0.0f);
  EXPECT_NEAR(k.sampling.top_p.value(), 0.9, 1e-4);
  EXPECT_FALSE(k.sampling.min_p.has_value());
  EXPECT_EQ(k.sampling.top_k.value(), 20);
  EXPECT_EQ(k.sampling.seed.value(), 42u);
  EXPECT_EQ(k.source, "bpf");

  qk_submission ids{};
  ids = valid_text("");
  ids.data.hdr.flags = 0;
  const int32_t want[3] = {9707, 11, 151643};
  std::memcpy(ids.data.prompt, want, sizeof want);
  ids.data.prompt_len = 3;
  ids.len = QK_GENERATE_FIXED + sizeof want;
  const KernelRequest k2 = decode_submission(ids, sizeof ids);
  EXPECT_EQ(k2.prompt_ids, std::vector<int32_t>(want, want + 3));
  EXPECT_FALSE(k2.append);
}

TEST(KernelRequest, EveryMalformedFieldIsRefused) {
  const std::vector<std::pair<const char*, void (*)(qk_submission&)>> cases = {
      {"origin", [](qk_submission& r) { r.origin = 9; }},
      {"magic", [](qk_submission& r) { r.data.hdr.magic = 1; }},
      {"version", [](qk_submission& r) { r.data.hdr.version = 2; }},
      {"kind", [](qk_submission& r) { r.data.hdr.kind = QK_POLL; }},
      {"flags", [](qk_submission& r) { r.data.hdr.flags |= 0x80; }},
      {"request id", [](qk_submission& r) { r.data.hdr.request_id = 0; }},
      {"session chars", [](qk_submission& r) { r.data.hdr.session[2] = '/'; }},
      {"session padding", [](qk_submission& r) { r.data.hdr.session[20] = 'x'; }},
      {"empty session", [](qk_submission& r) { std::memset(r.data.hdr.session, 0, 32); }},
      {"max_tokens 0", [](qk_submission& r) { r.data.max_tokens = 0; }},
      {"max_tokens big", [](qk_submission& r) { r.data.max_tokens = QK_MAX_TOKENS + 1; }},
      {"prompt 0", [](qk_submission& r) { r.data.prompt_len = 0; }},
      {"prompt past len", [](qk_submission& r) { r.data.prompt_len += 1; }},
      {"ids past the buffer", [](qk_submission& r) { r.data.hdr.flags = 0; r.data.prompt_len = 257; r.len = sizeof r.data; }},
      {"len short", [](qk_submission& r) { r.len = QK_GENERATE_FIXED - 1; }},
      {"len long", [](qk_submission& r) { r.len = sizeof(qk_generate) + 1; }},
  };
  for (const auto& [what, mutate] : cases) {
    qk_submission r = valid_text("hello kernel");
    mutate(r);
    EXPECT_THROW(decode_submission(r, sizeof r), Error) << what;
  }
  const qk_submission r = valid_text("hi");
  EXPECT_THROW(decode_submission(r, sizeof r - 1), Error) << "record shorter than a submission";
}

struct Slots {
  std::unique_ptr<qk_result_slot[]> mem{new qk_result_slot[QK_SLOTS]()};
  ResultSlots slots{mem.get(), -1};  // no session map: only the slots' own state is checked
};

TEST(ResultSlots, ASessionKeepsItsSlotAndOneRequestAtATime) {
  Slots s;
  const int a = s.slots.claim("a", 1);
  ASSERT_GE(a, 0);
  EXPECT_EQ(s.mem[a].request_id, 1u);
  EXPECT_EQ(std::string(s.mem[a].session), "a");
  EXPECT_EQ(s.slots.claim("a", 2), -1);  // its request still runs
  s.slots.release(a);
  EXPECT_EQ(s.slots.claim("a", 2), a);   // the same slot, reset for the new request
  EXPECT_EQ(s.mem[a].request_id, 2u);
  EXPECT_EQ(s.mem[a].produced, 0u);
  s.slots.release(a);
  // Every slot running: none for a new session; the least recently used idle one is reused.
  std::vector<int> held;
  for (int i = 0; i < QK_SLOTS - 1; ++i) held.push_back(s.slots.claim("s" + std::to_string(i), 10));
  for (int h : held) ASSERT_GE(h, 0);
  const int last = s.slots.claim("last", 3);
  EXPECT_EQ(last, a);  // a was the only idle slot
  EXPECT_EQ(s.slots.claim("more", 4), -1);
  s.slots.release(held[5]);
  EXPECT_EQ(s.slots.claim("more", 4), held[5]);
}

TEST(ResultSlots, WriterSplitsTextAndPublishesTheFinishLast) {
  Slots s;
  const int i = s.slots.claim("w", 9);
  {
    SlotWriter writer(s.slots, i, 9);
    EXPECT_TRUE(writer.push(11, 0, "Hi", nullptr));
    const std::string long_text(45, 'x');  // 20 + 20 + 5 bytes: three entries
    EXPECT_TRUE(writer.push(12, 1, long_text, nullptr));
    EXPECT_TRUE(writer.push(13, 2, "", nullptr));  // a token with no text still has an entry
    writer.finish("\xc3\xa9", {QK_FINISH_LENGTH, 0, 5, 2, 0, 3}, nullptr);
  }
  const qk_result_slot& r = s.mem[i];
  ASSERT_EQ(r.produced, 6u);
  EXPECT_EQ(r.finish, static_cast<uint32_t>(QK_FINISH_LENGTH));
  EXPECT_EQ(r.tokens, 3u);
  std::string text;
  std::vector<int32_t> ids;
  for (uint32_t k = 0; k < r.produced; ++k) {
    EXPECT_EQ(r.ring[k].seq, k);
    text.append(r.ring[k].text, r.ring[k].text_len);
    if (!(r.ring[k].flags & QK_TOK_CONT)) ids.push_back(r.ring[k].id);
  }
  EXPECT_EQ(text, "Hi" + std::string(45, 'x') + "\xc3\xa9");
  EXPECT_EQ(ids, (std::vector<int32_t>{11, 12, 13}));
  EXPECT_EQ(r.ring[5].id, -1);  // the text released at the end
  EXPECT_EQ(s.slots.claim("w", 10), i);  // the writer released its slot: the session's next request takes it
}

TEST(ResultSlots, TheRingIsNeverOverrunAndCancelIsSeen) {
  Slots s;
  const int i = s.slots.claim("r", 5);
  SlotWriter writer(s.slots, i, 5);
  // Never polled: the first QK_RING entries, then the writer stops rather than overwrite.
  for (int k = 0; k < QK_RING; ++k) ASSERT_TRUE(writer.push(k, k, "t", nullptr)) << k;
  EXPECT_FALSE(writer.push(QK_RING, QK_RING, "t", nullptr));
  EXPECT_EQ(s.mem[i].produced, static_cast<uint32_t>(QK_RING));
  EXPECT_EQ(s.mem[i].ring[0].seq, 0u);
  // A poll acknowledged 10 entries: 10 more fit.
  s.mem[i].acked = 10;
  s.mem[i].last_poll_ns = 1;  // polled, long ago: gone once the ring is full again
  for (int k = 0; k < 10; ++k) ASSERT_TRUE(writer.push(QK_RING + k, QK_RING + k, "t", nullptr));
  EXPECT_FALSE(writer.push(QK_RING + 10, QK_RING + 10, "t", nullptr));
  EXPECT_EQ(s.mem[i].ring[9].seq, static_cast<uint32_t>(QK_RING + 9));
  EXPECT_EQ(s.mem[i].ring[10].seq, 10u);  // not yet acknowledged: kept
  // A cancel written by the XDP program for this request ends it; one for another does not.
  EXPECT_FALSE(writer.cancelled());
  s.mem[i].cancel = 4;
  EXPECT_FALSE(writer.cancelled());
  s.mem[i].cancel = 5;
  EXPECT_TRUE(writer.cancelled());
}

}  // namespace
}  // namespace qwen3::kclient
