// orch-run's watchdog (--timeout), with the action that ends the process replaced. No timing
// is asserted: only that it fires when nothing disarms it, and never after disarm().
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tools/orch_run/watchdog.h"

using orch::run::Watchdog;

TEST_CASE("the watchdog fires when nothing disarms it") {
  std::atomic<int> fired{0};
  Watchdog w(0.01, [&] { ++fired; });
  for (int i = 0; i < 60000 && !fired; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(fired == 1);
  CHECK(w.fired());
}

TEST_CASE("a disarmed watchdog never fires, and zero seconds means none") {
  std::atomic<int> fired{0};
  {
    Watchdog w(3600, [&] { ++fired; });
    w.disarm();
    CHECK_FALSE(w.fired());
  }  // the destructor joins its thread: nothing runs after it
  {
    Watchdog none(0, [&] { ++fired; });
    Watchdog negative(-1, [&] { ++fired; });
  }
  CHECK(fired == 0);
}
