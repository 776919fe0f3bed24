#include "tools/orch_run/watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace orch::run {

Watchdog::Watchdog(double seconds, std::function<void()> on_expiry) {
  // Past 1e9 s (orch-run refuses more) the duration would overflow the clock's nanoseconds and
  // the deadline would lie in the past.
  if (!(seconds > 0) || !(seconds <= 1e9)) return;
  thread_ = std::thread([this, seconds, on_expiry = std::move(on_expiry)] {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(seconds));
    if (cv_.wait_until(lock, deadline, [this] { return disarmed_; })) return;
    fired_ = true;
    lock.unlock();
    on_expiry();
  });
}

Watchdog::~Watchdog() {
  disarm();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disarmed_ = true;
  }
  cv_.notify_all();
}

void report_and_exit(const std::string& message, int exit_code) {
  std::fflush(stdout);  // what the run printed so far
  const std::string line = message + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(2, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  std::_Exit(exit_code);
}

}  // namespace orch::run
