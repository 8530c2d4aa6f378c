#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include <ingest/sources/file_dataset.hpp>

using namespace ingest;

namespace {
// A reader over a fake "file" named by its contents: "ok:3" yields 3 records,
// "loss:1" one record then a DataLossError, "bad:2" alternates records and
// InvalidArgument, "io" fails to open.
struct FakeReader {
  FakeReader(const std::string& path, const int&) : path_(path) {
    if (path == "io") throw IoError("cannot open file", {.file = path});
    kind_ = path.substr(0, path.find(':'));
    left_ = std::stoi(path.substr(path.find(':') + 1));
  }
  std::optional<std::string> read() {
    if (kind_ == "loss" && left_ == 0) throw DataLossError("corrupted record at 7", {.offset = 7});
    if (left_ == 0) return std::nullopt;
    if (kind_ == "bad" && (step_++ % 2 == 1)) throw InvalidArgument("bad field");
    return path_ + "#" + std::to_string(left_--);
  }
  std::string path_, kind_;
  int left_ = 0, step_ = 0;
};

std::vector<std::string> outcomes(FileList files) {
  detail::FileSequenceIterator<FakeReader, int> it(std::move(files), 0, "fake");
  std::vector<std::string> out;
  for (int i = 0; i < 100; ++i) {
    try {
      auto x = it.next();
      if (!x) break;
      out.push_back(*x);
    } catch (const Error& e) {
      out.push_back(std::string(e.kind()) + "@" + e.context().file + "/" + e.context().stage);
    }
  }
  return out;
}
}  // namespace

TEST_CASE("FileList takes one path, a braced list or a vector", "[sources][file_dataset]") {
  CHECK(FileList("a").paths() == std::vector<std::string>{"a"});
  CHECK(FileList(std::string("a")).size() == 1);
  CHECK(FileList({"a", "b"}).paths() == std::vector<std::string>{"a", "b"});
  CHECK(FileList(std::vector<std::string>{"x", "y", "z"})[2] == "z");
  CHECK(FileList(std::vector<std::string>{}).size() == 0);
}

TEST_CASE("file sources move to the next file after data loss or an I/O error",
          "[sources][file_dataset]") {
  using V = std::vector<std::string>;
  CHECK(outcomes({"ok:2", "ok:1"}) == V{"ok:2#2", "ok:2#1", "ok:1#1"});
  CHECK(outcomes({"loss:1", "ok:1"}) == V{"loss:1#1", "DataLossError@loss:1/fake", "ok:1#1"});
  CHECK(outcomes({"io", "ok:1"}) == V{"IoError@io/fake", "ok:1#1"});
  // Other errors skip only the record: the file goes on.
  CHECK(outcomes({"bad:2", "ok:1"}) ==
        V{"bad:2#2", "InvalidArgument@bad:2/fake", "bad:2#1", "ok:1#1"});
  CHECK(outcomes(std::vector<std::string>{}).empty());
}
