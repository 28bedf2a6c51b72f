// Persistent worker threads for operator calls: run(fn) calls fn(t) for every
// worker t in parallel (t = 0 on the calling thread) and returns when all are
// done, rethrowing the first exception. No thread is spawned per call.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qwen3::engine {

class WorkerPool {
 public:
  explicit WorkerPool(int workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return workers_; }
  void run(const std::function<void(int)>& fn);

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

}  // namespace qwen3::engine
