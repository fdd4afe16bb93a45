// A bounded pool of threads for CPU-heavy work that must stay off the asio and actor threads
// (Argon2id password hashing, the text of PDF documents). When the queue is full, `try_submit`
// refuses instead of letting a login storm grow memory and latency without bound.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace crm::net {

class worker_pool {
public:
  worker_pool(int threads, std::size_t queue_limit);
  ~worker_pool();
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  bool try_submit(std::function<void()> job);
  void stop();

private:
  std::size_t limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

} // namespace crm::net
