// A fixed set of worker threads that run one job at a time on all of them;
// the caller takes part as worker 0. Starting a job costs microseconds, so a
// forward pass can split every matrix product over the cores.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qwen3::reference {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(i) for i in [0, size()) concurrently and waits; rethrows the first exception.
  void run(const std::function<void(int)>& fn);
  // Splits [0, n) into size() contiguous parts (multiples of `align`) and runs fn(begin, end) on each.
  void parallel_for(int64_t n, int64_t align, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace qwen3::reference
