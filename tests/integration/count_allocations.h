// The heap-allocation counter of a test program linked with
// count_allocations.cpp (which replaces the global operator new).
#pragma once

#include <cstdint>

namespace alloc_count {
/// Allocations through operator new since the program started, all threads.
std::uint64_t allocations();
}  // namespace alloc_count
