// orch-run --timeout: a deadline for the whole run. CUDA cannot cancel a kernel that never
// finishes, and a synchronize on it waits forever; what ends such a kernel is the end of the
// process, so on expiry the watchdog reports and exits the process (the driver then tears the
// context down and the GPU is free again).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace orch::run {

class Watchdog {
 public:
  // Calls `on_expiry` on its own thread if `seconds` pass before disarm(); seconds <= 0: never.
  Watchdog(double seconds, std::function<void()> on_expiry);
  ~Watchdog();  // disarms
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void disarm();
  bool fired() const { return fired_.load(); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

// What orch-run's watchdog does on expiry: writes `message` and one line to stderr (with
// write(2), which takes no lock another thread may hold) and ends the process with `exit_code`.
[[noreturn]] void report_and_exit(const std::string& message, int exit_code);

}  // namespace orch::run
