// Replaces the global operator new of the runtime's unit tests with one that
// throws std::bad_alloc on demand (failing_allocations.h), so that tests can
// walk a function through running out of memory at each of its allocations.
#include "failing_allocations.h"

#include <cstdlib>
#include <new>

namespace {
thread_local int tlsLeft = -1;  // allocations left before they fail; -1: never
thread_local int tlsFailing = -1;  // of those that fail, how many; -1: all

void* allocate(std::size_t n) {
  if (tlsLeft == 0) {
    if (tlsFailing > 0 && --tlsFailing == 0) tlsLeft = -1;
    throw std::bad_alloc();
  }
  if (tlsLeft > 0) --tlsLeft;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

namespace failing_allocations {
void failAfter(int n) {
  tlsLeft = n;
  tlsFailing = -1;
}
void failOnce(int n) { failFor(n, 1); }
void failFor(int n, int count) {
  tlsLeft = count > 0 ? n : -1;
  tlsFailing = count;
}
void stop() { tlsLeft = -1; }
}  // namespace failing_allocations

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
