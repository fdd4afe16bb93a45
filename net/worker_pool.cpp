#include "net/worker_pool.hpp"

#include "persistence/log.hpp"

namespace crm::net {

worker_pool::worker_pool(int threads, std::size_t queue_limit) : limit_(queue_limit) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      name_this_thread("crm.worker");
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
          if (queue_.empty()) return;
          job = std::move(queue_.front());
          queue_.pop_front();
        }
        run_guarded("a worker pool job", job);
      }
    });
}

worker_pool::~worker_pool() {
  stop();
}

bool worker_pool::try_submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= limit_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void worker_pool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

} // namespace crm::net
