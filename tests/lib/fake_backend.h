// A small deterministic backend for the daemon's parts that need no model (sessions, scheduler,
// session store): the next token after a sequence is (sum of its tokens) % 100, so every step is
// checkable; KV only counts positions.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "engine/backend.h"
#include "sessions/session_manager.h"

namespace qwen3::testing {


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

// Session limits small enough for the fake backend's caches.
inline SessionLimits limits(int max_sessions, size_t budget, int ttl_seconds = 0) {
  SessionLimits l;
  l.max_sessions = max_sessions;
  l.kv_budget_bytes = budget;
  l.ttl = std::chrono::seconds(ttl_seconds);
  l.default_context = 16;
  l.max_context = 64;
  return l;
}

}  // namespace qwen3::testing
