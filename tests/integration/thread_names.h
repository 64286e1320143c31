// threadNames(): the names of this process's threads, from /proc, for tests
// that check which of Myelin's threads exist (named by thread_name.h).
#pragma once

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace myelin_test {

inline std::multiset<std::string> threadNames() {
  std::multiset<std::string> names;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(t.path() / "comm");  // a thread that just ended leaves an empty name
    std::string name;
    std::getline(in, name);
    names.insert(name);
  }
  return names;
}

}  // namespace myelin_test
