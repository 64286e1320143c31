// The process's UncaughtHandler (myelin/errors.h, runtime/uncaught.h): the
// handler the application set, or the default that writes one line to
// stderr.
#include "runtime/uncaught.h"

#include <cstdio>
#include <memory>
#include <mutex>

#include "myelin/errors.h"

namespace myelin {
namespace {

std::mutex gMu;
std::shared_ptr<const UncaughtHandler> gHandler;  // null: the default

void writeToStderr(const char* where, const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "myelin: an exception left %s: %s\n", where, e.what());
  } catch (...) {
    std::fprintf(stderr, "myelin: an exception left %s (not a std::exception)\n", where);
  }
}

}  // namespace

UncaughtHandler setUncaughtHandler(UncaughtHandler handler) {
  auto next = handler ? std::make_shared<const UncaughtHandler>(std::move(handler)) : nullptr;
  std::shared_ptr<const UncaughtHandler> prev;
  {
    std::lock_guard lock(gMu);
    prev = std::exchange(gHandler, std::move(next));
  }
  return prev ? *prev : UncaughtHandler{};
}

namespace detail {

void reportUncaught(const char* where, std::exception_ptr error) noexcept {
  std::shared_ptr<const UncaughtHandler> handler;
  {
    std::lock_guard lock(gMu);  // rare: only when user code threw
    handler = gHandler;
  }
  if (!handler) {
    writeToStderr(where, error);
    return;
  }
  try {
    (*handler)(where, std::move(error));
  } catch (...) {
    // The handler must not throw; there is nobody left to tell.
  }
}

}  // namespace detail
}  // namespace myelin
