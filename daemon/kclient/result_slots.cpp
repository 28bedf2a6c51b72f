#include "kclient/result_slots.h"

#include <bpf/bpf.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "kclient_abi.h"

namespace qwen3::kclient {

namespace {

// What bpf_ktime_get_ns() returns.
uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t load(const uint32_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
void store(uint32_t& v, uint32_t x) { __atomic_store_n(&v, x, __ATOMIC_RELEASE); }

// A client that polled once and then went quiet this long with the ring full is gone.
constexpr uint64_t kClientGoneNs = 10ull * 1000 * 1000 * 1000;

}  // namespace

ResultSlots::ResultSlots(qk_result_slot* slots, int sessions_fd)
    : slots_(slots), sessions_fd_(sessions_fd), entries_(QK_SLOTS) {}

qk_result_slot* ResultSlots::at(int index) const { return &slots_[index]; }

int ResultSlots::claim(const std::string& session, uint32_t request_id) {
  std::lock_guard lock(mu_);
  int pick = -1;
  for (int i = 0; i < QK_SLOTS; ++i)
    if (entries_[i].session == session) pick = i;
  if (pick >= 0 && entries_[pick].running) return -1;  // the session's own request still runs
  if (pick < 0) {  // a free slot, else the least recently used idle one
    for (int i = 0; i < QK_SLOTS && pick < 0; ++i)
      if (!entries_[i].running && entries_[i].session.empty()) pick = i;
  }
  if (pick < 0) {
    for (int i = 0; i < QK_SLOTS; ++i)
      if (!entries_[i].running && (pick < 0 || entries_[i].used < entries_[pick].used)) pick = i;
  }
  if (pick < 0) return -1;
  Entry& e = entries_[pick];
  char key[QK_SESSION_BYTES] = {};
  if (!e.session.empty() && e.session != session) {
    std::memcpy(key, e.session.data(), e.session.size());
    bpf_map_delete_elem(sessions_fd_, key);
    std::memset(key, 0, sizeof key);
  }
  e.session = session;
  e.running = true;
  e.used = std::chrono::steady_clock::now();

  qk_result_slot* s = &slots_[pick];
  store(s->request_id, 0);  // polls of the previous request now read "pending"
  store(s->finish, 0);
  store(s->produced, 0);
  s->error = 0;
  s->cancel = 0;
  s->acked = 0;
  s->positions = s->prompt_tokens = s->cached_tokens = s->tokens = 0;
  s->last_poll_ns = 0;
  std::memset(s->session, 0, sizeof s->session);
  std::memcpy(s->session, session.data(), std::min(session.size(), sizeof s->session));
  store(s->request_id, request_id);
  std::memcpy(key, session.data(), std::min(session.size(), sizeof key));
  const uint32_t index = static_cast<uint32_t>(pick);
  bpf_map_update_elem(sessions_fd_, key, &index, BPF_ANY);
  return pick;
}

void ResultSlots::release(int index) {
  std::lock_guard lock(mu_);
  entries_[index].running = false;
  entries_[index].used = std::chrono::steady_clock::now();
}

void ResultSlots::fail(int index, uint32_t request_id, uint32_t error) {
  qk_result_slot* s = &slots_[index];
  if (load(s->request_id) == request_id) {
    s->error = error;
    store(s->finish, QK_FINISH_ERROR);
  }
  release(index);
}

SlotWriter::SlotWriter(ResultSlots& slots, int index, uint32_t request_id)
    : slots_(slots), slot_(slots.at(index)), index_(index), request_id_(request_id),
      started_(std::chrono::steady_clock::now()) {}

SlotWriter::~SlotWriter() { slots_.release(index_); }

bool SlotWriter::cancelled() const { return __atomic_load_n(&slot_->cancel, __ATOMIC_ACQUIRE) == request_id_; }

void SlotWriter::set_tokens(uint32_t tokens) { slot_->tokens = tokens; }

bool SlotWriter::put(int32_t id, int token_index, uint8_t flags, const char* text, size_t len,
                     const std::function<bool()>& stop) {
  // Never overwrite an entry its client has not polled past.
  while (produced_ - load(slot_->acked) >= QK_RING) {
    const uint64_t last = slot_->last_poll_ns;
    const uint64_t now = monotonic_ns();
    if (last == 0 || now - last > kClientGoneNs) return false;  // never polled, or gone
    if (cancelled() || (stop && stop())) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  qk_token& t = slot_->ring[produced_ & (QK_RING - 1)];
  t.id = id;
  t.seq = produced_;
  t.index = static_cast<uint16_t>(token_index);
  t.flags = flags;
  t.text_len = static_cast<uint8_t>(len);
  std::memset(t.text, 0, sizeof t.text);
  std::memcpy(t.text, text, len);
  store(slot_->produced, ++produced_);
  return true;
}

bool SlotWriter::push(int32_t id, int token_index, const std::string& text, const std::function<bool()>& stop) {
  size_t at = 0;
  uint8_t flags = 0;
  do {
    const size_t n = std::min<size_t>(text.size() - at, QK_TOK_TEXT_BYTES);
    if (!put(id, token_index, flags, text.data() + at, n, stop)) return false;
    at += n;
    flags = QK_TOK_CONT;
  } while (at < text.size());
  slot_->tokens = static_cast<uint32_t>(token_index + 1);
  return !cancelled();
}

void SlotWriter::finish(const std::string& final_text, const FinishStats& st, const std::function<bool()>& stop) {
  for (size_t at = 0; at < final_text.size(); at += QK_TOK_TEXT_BYTES) {
    const size_t n = std::min<size_t>(final_text.size() - at, QK_TOK_TEXT_BYTES);
    if (!put(-1, static_cast<int>(st.tokens), QK_TOK_CONT, final_text.data() + at, n, stop)) break;
  }
  slot_->error = st.error;
  slot_->positions = st.positions;
  slot_->prompt_tokens = st.prompt_tokens;
  slot_->cached_tokens = st.cached_tokens;
  slot_->tokens = st.tokens;
  store(slot_->finish, st.finish);  // last: a reader that sees it sees every entry
}

}  // namespace qwen3::kclient
