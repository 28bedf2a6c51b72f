// Persistent worker threads, the one pool of the project (BPF operator calls, the float
// reference, the tools): run(fn) calls fn(t) for every worker t in parallel (t = 0 on the calling
// thread) and returns when all are done, rethrowing the first exception. No thread is spawned per
// call, and a short spin before the futex wait catches back-to-back calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qwen3 {

class WorkerPool {
 public:
  explicit WorkerPool(int workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return workers_; }
  void run(const std::function<void(int)>& fn);
  // Splits [0, n) into size() contiguous parts (multiples of `align`) and runs fn(begin, end) on each.
  void parallel_for(int64_t n, int64_t align, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void loop(int t);

  int workers_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int)>* fn_ = nullptr;
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace qwen3
