// Allocation failures on demand for the runtime's unit tests: the global
// operator new of the test program (failing_allocations.cpp) throws
// std::bad_alloc for this thread's allocations once a countdown runs out.
#pragma once

namespace failing_allocations {

/// This thread's next `n` allocations succeed and the ones after them
/// throw std::bad_alloc, until stop().
void failAfter(int n);
/// This thread's next `n` allocations succeed, the one after them throws
/// std::bad_alloc, and the ones after it succeed.
void failOnce(int n);
/// This thread's next `n` allocations succeed, the `count` after them
/// throw std::bad_alloc, and the ones after those succeed.
void failFor(int n, int count);
/// Allocations succeed again.
void stop();

}  // namespace failing_allocations
