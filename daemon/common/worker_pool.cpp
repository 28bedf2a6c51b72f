#include "common/worker_pool.h"

#include <algorithm>

namespace qwen3 {

WorkerPool::WorkerPool(int workers) : workers_(workers < 1 ? 1 : workers) {
  for (int t = 1; t < workers_; t++) threads_.emplace_back([this, t] { loop(t); });
}

WorkerPool::~WorkerPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& th : threads_) th.join();
}

void WorkerPool::loop(int t) {
  uint64_t seen = 0;
  for (;;) {
    // A short spin catches back-to-back operator calls without a futex round trip.
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < 4000; spin++) g = generation_.load(std::memory_order_acquire);
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    try {
      (*fn_)(t);
    } catch (...) {
      std::lock_guard lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void WorkerPool::run(const std::function<void(int)>& fn) {
  if (workers_ == 1) {
    fn(0);
    return;
  }
  fn_ = &fn;
  error_ = nullptr;
  pending_.store(workers_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  int p = pending_.load(std::memory_order_acquire);
  for (int spin = 0; p != 0 && spin < 4000; spin++) p = pending_.load(std::memory_order_acquire);
  while (p != 0) {
    pending_.wait(p, std::memory_order_acquire);
    p = pending_.load(std::memory_order_acquire);
  }
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::parallel_for(int64_t n, int64_t align, const std::function<void(int64_t, int64_t)>& fn) {
  const int parts = size();
  if (parts == 1 || n <= align) {
    if (n > 0) fn(0, n);
    return;
  }
  int64_t per = (n + parts - 1) / parts;
  per = (per + align - 1) / align * align;
  run([&](int i) {
    int64_t begin = std::min(n, i * per), end = std::min(n, begin + per);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace qwen3
