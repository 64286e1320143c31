// Starts a service program as a child process for an integration test,
// reads the port it prints, and stops (or kill -9s) it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace myelin_test {

class ServiceProcess {
 public:
  explicit ServiceProcess(const std::string& path, std::vector<std::string> args = {}) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<char*> argv{const_cast<char*>(path.c_str())};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, path.c_str(), &fa, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("cannot start " + path);
    }
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    ::fcntl(stdin_, F_SETFD, FD_CLOEXEC);
    FILE* f = ::fdopen(out[0], "r");
    unsigned port = 0;
    if (std::fscanf(f, "PORT %u", &port) != 1) throw std::runtime_error(path + " did not print its port");
    std::fclose(f);
    port_ = static_cast<std::uint16_t>(port);
  }
  ~ServiceProcess() { stop(); }

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  /// Kills the process with SIGKILL (no chance to clean up).
  void kill9() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  /// Closes its stdin and waits for it to exit (SIGKILL after 10 s).
  void stop() {
    if (stdin_ >= 0) {
      ::close(stdin_);
      stdin_ = -1;
    }
    if (pid_ <= 0) return;
    for (int i = 0; i < 1000; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill9();
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace myelin_test
