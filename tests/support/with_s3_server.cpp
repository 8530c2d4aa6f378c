// Runs a command against a fresh S3 server: starts SeaweedFS on 127.0.0.1
// (tests/support/seaweedfs.hpp), creates a bucket, points the AWS
// environment variables at the server (AWS_ENDPOINT_URL, AWS_REGION, the
// test's access key), replaces "{bucket}" in the arguments with the bucket's
// name, runs the command and exits with its status. CI runs the
// s3_pipeline example through it.
//
//   with_s3_server ./s3_pipeline s3://{bucket}/train
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "support/seaweedfs.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s command [args...] ('{bucket}' is replaced)\n", argv[0]);
    return 2;
  }
  try {
    ingest::testing::SeaweedS3 server;
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
