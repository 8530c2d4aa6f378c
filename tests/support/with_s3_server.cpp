// Runs a command against an S3 server: SeaweedFS on 127.0.0.1
// (tests/support/seaweedfs.hpp), the one $INGEST_TEST_S3_SERVER names or a
// fresh one. Creates a bucket, points the AWS environment variables at the
// server (AWS_ENDPOINT_URL, AWS_REGION, the test's access key), replaces
// "{bucket}" in the arguments with the bucket's name, runs the command and
// exits with its status. CI runs the s3_pipeline example through it.
//
//   with_s3_server ./s3_pipeline s3://{bucket}/train
//
// It also runs the server that CTest's s3_server fixture shares between
// test processes (each would otherwise wait seconds for its own to start):
//
//   with_s3_server --serve FILE   starts a server in the background, writes
//                                 its state to FILE (what
//                                 INGEST_TEST_S3_SERVER=FILE reads) and exits
//                                 once it accepts writes; the server stops
//                                 when FILE is removed or the process that
//                                 ran this command (CTest) exits
//   with_s3_server --stop FILE    removes FILE and waits for the server to stop
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "support/seaweedfs.hpp"

namespace {

using ingest::testing::SeaweedS3;

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// The server's own process: detached from the caller's terminal and output
// (CTest waits for a test's pipes to close), it runs until `state` is
// removed, `watched` exits, or a day has passed.
[[noreturn]] void serve(const std::string& state, pid_t watched) {
  ::setsid();
  const std::string log = state + ".log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int null = ::open("/dev/null", O_RDONLY);
  if (fd < 0 || null < 0) ::_exit(126);
  ::dup2(null, STDIN_FILENO);
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  int status = 0;
  try {
    SeaweedS3 server;
    server.write_state(state);
    const auto end = std::chrono::steady_clock::now() + std::chrono::hours(24);
    while (exists(state) && ::kill(watched, 0) == 0 && std::chrono::steady_clock::now() < end) {
      ::usleep(200'000);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "with_s3_server: %s\n", e.what());
    status = 1;
  }
  std::fflush(nullptr);
  std::remove(state.c_str());
  ::_exit(status);
}

int start_server(const std::string& state) {
  std::remove(state.c_str());
  const pid_t watched = ::getppid();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) serve(state, watched);
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      std::fprintf(stderr, "with_s3_server: the server did not start; its log (%s.log):\n%s\n",
                   state.c_str(), ingest::testing::file_contents(state + ".log").c_str());
      return 1;
    }
    if (exists(state)) {
      std::printf("with_s3_server: SeaweedFS's S3 at %s (pid %d, state in %s)\n",
                  SeaweedS3(SeaweedS3::Running{}, state).endpoint().c_str(), static_cast<int>(pid),
                  state.c_str());
      return 0;
    }
    ::usleep(100'000);
  }
}

int stop_server(const std::string& state) {
  if (!exists(state)) {
    std::printf("with_s3_server: no server runs from %s\n", state.c_str());
    return 0;
  }
  std::ifstream in(state);
  long pid = 0;
  in >> pid;
  std::remove(state.c_str());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "with_s3_server: the server (pid %ld) did not stop in 30 s\n", pid);
      return 1;
    }
    ::usleep(100'000);
  }
  std::printf("with_s3_server: the server from %s stopped\n", state.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 ||
      ((std::string(argv[1]) == "--serve" || std::string(argv[1]) == "--stop") && argc != 3)) {
    std::fprintf(stderr,
                 "usage: %s command [args...] ('{bucket}' is replaced)\n"
                 "       %s --serve STATE_FILE | --stop STATE_FILE\n",
                 argv[0], argv[0]);
    return 2;
  }
  try {
    if (std::string(argv[1]) == "--serve") return start_server(argv[2]);
    if (std::string(argv[1]) == "--stop") return stop_server(argv[2]);
    SeaweedS3 server = SeaweedS3::from_environment();
    const std::string bucket = server.make_bucket("example");
    ::setenv("AWS_ENDPOINT_URL", server.endpoint().c_str(), 1);
    ::setenv("AWS_REGION", "us-east-1", 1);
    ::setenv("AWS_ACCESS_KEY_ID", ingest::testing::SeaweedS3::kAccessKey, 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", ingest::testing::SeaweedS3::kSecretKey, 1);
    ::unsetenv("AWS_SESSION_TOKEN");
    ::unsetenv("AWS_ENDPOINT_URL_S3");
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      for (auto at = a.find("{bucket}"); at != std::string::npos; at = a.find("{bucket}"))
        a.replace(at, 8, bucket);
      args.push_back(std::move(a));
    }
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::execv(cargs[0], cargs.data());
      std::perror("with_s3_server: exec");
      ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "with_s3_server: %s\n", e.what());
    return 1;
  }
}
