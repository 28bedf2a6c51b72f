// The result slots (bpf_ops/kclient_abi.h: qk_result_slot, mmapped from the
// "qk_results" map) and the session index ("qk_sessions") the XDP program
// answers polls from. ResultSlots hands a slot to each request (the slot its
// session already has, else a free one, else the least recently used idle
// one); SlotWriter publishes one request's entries in order, never running
// QK_RING entries ahead of what its client has polled.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

struct qk_result_slot;

namespace qwen3::kclient {

struct FinishStats {
  uint32_t finish = 0;  // enum qk_finish
  uint32_t error = 0;   // enum qk_error
  uint32_t positions = 0, prompt_tokens = 0, cached_tokens = 0, tokens = 0;
};

class ResultSlots;

class SlotWriter {
 public:
  SlotWriter(ResultSlots& slots, int index, uint32_t request_id);
  ~SlotWriter();
  SlotWriter(const SlotWriter&) = delete;
  SlotWriter& operator=(const SlotWriter&) = delete;

  // One token and the text released with it (split over entries of 20 bytes).
  // False when the request must end: cancelled by its client, or its client
  // stopped polling with the ring full (`stop` is checked while waiting).
  bool push(int32_t id, int token_index, const std::string& text, const std::function<bool()>& stop);
  // Text released at the end (id -1), then the finish (published last).
  void finish(const std::string& final_text, const FinishStats& stats, const std::function<bool()>& stop);
  // A QK_CANCEL datagram reached this request.
  bool cancelled() const;
  void set_tokens(uint32_t tokens);

 private:
  bool put(int32_t id, int token_index, uint8_t flags, const char* text, size_t len, const std::function<bool()>& stop);

  ResultSlots& slots_;
  qk_result_slot* slot_;
  int index_;
  uint32_t request_id_;
  uint32_t produced_ = 0;
  std::chrono::steady_clock::time_point started_;
};

class ResultSlots {
 public:
  // `slots`: the mmapped array of QK_SLOTS; `sessions_fd`: the qk_sessions map.
  ResultSlots(qk_result_slot* slots, int sessions_fd);

  // A slot for `session`'s request `request_id`, reset and published, or -1
  // when every slot is held by a running request.
  int claim(const std::string& session, uint32_t request_id);
  // The request on slot `index` ended; the slot keeps its answer for polls.
  void release(int index);
  // Reports an error for a request that never ran (its slot ends at once).
  void fail(int index, uint32_t request_id, uint32_t error);
  qk_result_slot* at(int index) const;

 private:
  struct Entry {
    std::string session;
    bool running = false;
    std::chrono::steady_clock::time_point used;
  };
  qk_result_slot* slots_;
  int sessions_fd_;
  std::mutex mu_;
  std::vector<Entry> entries_;
};

}  // namespace qwen3::kclient
