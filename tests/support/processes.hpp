// Child processes for crash tests: run a function in a forked child, wait
// until it says it is ready, then SIGKILL it (as a crash or the OOM killer
// would), or keep it alive while the parent looks.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <stdexcept>

namespace ingest::testing {

/// A forked child that ran `setup` and is now blocked until killed. Its
/// destructor SIGKILLs and reaps it.
class ChildProcess {
 public:
  /// Forks; the child runs `setup` (single-threaded code only: a forked
  /// child has no other threads), reports back and waits to be killed.
  /// Throws std::runtime_error if the child fails or does not report within
  /// `timeout_ms`.
  explicit ChildProcess(const std::function<void()>& setup, int timeout_ms = 20000) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::close(fds[0]);
      char ok = 'n';
      try {
        setup();
        ok = 'y';
      } catch (...) {
      }
      [[maybe_unused]] auto put = ::write(fds[1], &ok, 1);
      for (;;) ::pause();
    }
    ::close(fds[1]);
    pollfd p{fds[0], POLLIN, 0};
    char got = 0;
    const bool ready = ::poll(&p, 1, timeout_ms) == 1 && ::read(fds[0], &got, 1) == 1 && got == 'y';
    ::close(fds[0]);
    if (!ready) {
      kill();
      throw std::runtime_error("the child process failed or did not report");
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { kill(); }

  /// SIGKILLs the child and waits until it is gone (no-op the second time).
  void kill() noexcept {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_ = -1;
};

}  // namespace ingest::testing
