// Names Myelin's own threads ("myelin-reader", "myelin-pool", ...) so that
// top -H, perf, gdb and /proc/<pid>/task/*/comm tell them from the
// application's threads.
#pragma once

#include <pthread.h>

namespace myelin::detail {

/// Names the calling thread; `name` has at most 15 characters (Linux's
/// limit). A name the system refuses is left out: it only helps a reader.
inline void nameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace myelin::detail
