// `ingest`: the command-line tool for TFRecord data (docs/cli.md). Picks the
// subcommand, prints help, and turns the errors that escape a subcommand
// into messages and exit codes (cli.hpp: ExitCode).
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <vector>

#include <ingest/core/errors.hpp>
#include <ingest/formats/crc32c.hpp>
#include <ingest/formats/tfrecord_format.hpp>
#include <ingest/storage/file.hpp>

#include "cli.hpp"

namespace ingest::cli {

Compression detect_compression(const std::string& path) {
  detail::FileReader file(path, "ingest");
  unsigned char head[12];
  std::size_t have = 0;
  while (have < sizeof head) {
    const std::size_t got = file.read(head + have, sizeof head - have);
    if (got == 0) break;
    have += got;
  }
  const char* p = reinterpret_cast<const char*>(head);
  if (have == sizeof head && masked_crc32c(p, 8) == detail::load_le32(p + 8)) {
    return Compression::none;
  }
  if (have >= 2 && head[0] == 0x1f && head[1] == 0x8b) return Compression::gzip;
  // RFC 1950: deflate (CM 8), a window of at most 32 KiB, and a header check.
  if (have >= 2 && (head[0] & 0x0f) == 8 && (head[0] >> 4) <= 7 &&
      (head[0] * 256 + head[1]) % 31 == 0) {
    return Compression::zlib;
  }
  return Compression::none;
}

}  // namespace ingest::cli

namespace {

using ingest::cli::Command;

constexpr const char* version = "0.1.0";

const Command* const commands[] = {&ingest::cli::inspect_command, &ingest::cli::index_command,
                                   &ingest::cli::write_tfrecords_command};

void print_help() {
  std::printf(
      "usage: ingest <command> [options] [arguments]\n"
      "\n"
      "Tools for TFRecord data, built on the ingest library.\n"
      "\n"
      "commands:\n");
  for (const Command* c : commands) {
    std::printf("  %-17s %.*s\n", std::string(c->name).c_str(), static_cast<int>(c->summary.size()),
                c->summary.data());
  }
  std::printf(
      "\n"
      "Run 'ingest <command> --help' for a command's options.\n"
      "\n"
      "exit codes:\n"
      "  0  success\n"
      "  1  corrupt or truncated data found (bad CRC, bad length, malformed CSV record)\n"
      "  2  usage error (unknown command or option, bad value)\n"
      "  3  a file cannot be opened, read or written, or is unsuitable (e.g. compressed\n"
      "     for 'index', a folder without class directories)\n"
      "  4  internal error\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ingest::cli;
  const std::vector<std::string> all(argv + 1, argv + argc);
  if (all.empty()) {
    print_help();
    return exit_usage;
  }
  const std::string& name = all[0];
  if (name == "--help" || name == "-h" || name == "help") {
    print_help();
    return exit_ok;
  }
  if (name == "--version") {
    std::printf("ingest %s\n", version);
    return exit_ok;
  }
  const Command* command = nullptr;
  for (const Command* c : commands) {
    if (c->name == name) command = c;
  }
  if (!command) {
    std::fprintf(stderr, "ingest: unknown command '%s'\nRun 'ingest --help' for the commands.\n",
                 name.c_str());
    return exit_usage;
  }
  const std::span<const std::string> args(all.begin() + 1, all.end());
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      std::fwrite(command->help.data(), 1, command->help.size(), stdout);
      return exit_ok;
    }
  }
  const std::string prefix = "ingest " + std::string(command->name);
  try {
    return command->run(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", prefix.c_str(), e.what(),
                 prefix.c_str());
    return exit_usage;
  } catch (const ingest::DataLossError& e) {
    std::fprintf(stderr, "%s: %s\n", prefix.c_str(), e.what());
    return exit_bad_data;
  } catch (const ingest::Error& e) {
    std::fprintf(stderr, "%s: %s\n", prefix.c_str(), e.what());
    return exit_io;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory\n", prefix.c_str());
    return exit_io;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", prefix.c_str(), e.what());
    return exit_internal;
  }
}
