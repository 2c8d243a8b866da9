// src/backend/cpu/thread_pool.hpp - the process-wide pool that runs the programs of a CPU launch.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tle::cpu {

/// A fixed set of std::thread workers. parallel_for splits [0, n) into chunks that the workers and
/// the calling thread take from a shared counter; it blocks until every chunk has run. Launches
/// from several threads are serialized. An exception thrown by `fn` stops handing out chunks and
/// is rethrown on the calling thread (never escapes a worker).
class ThreadPool {
 public:
  /// The process-wide pool: hardware_concurrency threads of work in total (hardware_concurrency-1
  /// workers plus the launching thread), created on first use and never destroyed.
  static ThreadPool& global();

  explicit ThreadPool(unsigned workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned workers() const { return static_cast<unsigned>(threads_.size()); }
  /// Calls fn(begin, end) over disjoint chunks covering [0, n). Runs inline when n is 1 or the
  /// pool has no workers.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_main();
  void run_chunks();

  std::vector<std::thread> threads_;
  std::mutex launch_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  uint64_t generation_ = 0;
  unsigned busy_ = 0;  // workers still in the current job
  bool stop_ = false;
  // The current job (valid while a parallel_for runs).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  int64_t next_ = 0;  // guarded by mu_ (chunks are coarse, contention is low)
  std::exception_ptr error_;
};

}  // namespace tle::cpu
