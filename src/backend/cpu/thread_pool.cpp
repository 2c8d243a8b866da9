// src/backend/cpu/thread_pool.cpp - see thread_pool.hpp.
#include "backend/cpu/thread_pool.hpp"

#include <algorithm>

namespace tle::cpu {

ThreadPool& ThreadPool::global() {
  // Leaked on purpose: workers must outlive every static object that may still launch kernels.
  static ThreadPool* pool = [] {
    unsigned hc = std::max(1u, std::thread::hardware_concurrency());
    return new ThreadPool(hc - 1);
  }();
  return *pool;
}

ThreadPool::ThreadPool(unsigned workers) {
  threads_.reserve(workers);
  for (unsigned i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_main(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    int64_t b;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (next_ >= n_) return;
      b = next_;
      next_ = std::min(n_, next_ + chunk_);
    }
    int64_t e = std::min(n_, b + chunk_);
    try {
      (*fn_)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
      next_ = n_;  // hand out no more chunks
    }
  }
}

void ThreadPool::worker_main() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--busy_ == 0) done_cv_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || threads_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> launch(launch_mu_);
  const int64_t threads = int64_t(threads_.size()) + 1;
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = &fn;
    n_ = n;
    // About 4 chunks per thread balances uneven programs without much counter traffic.
    chunk_ = std::max<int64_t>(1, n / (threads * 4));
    next_ = 0;
    error_ = nullptr;
    busy_ = static_cast<unsigned>(threads_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  run_chunks();
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return busy_ == 0; });
    fn_ = nullptr;
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace tle::cpu
