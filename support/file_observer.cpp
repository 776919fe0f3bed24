#include "support/file_observer.h"

namespace orch {

namespace {
std::atomic<FileObserver*> g_observer{nullptr};
}  // namespace

FileObserver* file_observer() { return g_observer.load(std::memory_order_acquire); }
void set_file_observer(FileObserver* observer) { g_observer.store(observer, std::memory_order_release); }

}  // namespace orch
