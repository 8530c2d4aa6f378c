#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using ingest::testing::TempDir;
using Samples = std::vector<std::pair<std::string, std::int64_t>>;
namespace fs = std::filesystem;

namespace {
void touch(const TempDir& dir, const std::string& name) {
  fs::create_directories((dir.path() / name).parent_path());
  testing::write_file(dir / name, name);
}

// root/a_cat, root/b_dog (nested directories, a link back to an ancestor),
// root/c_link (a link to a directory outside root), files of other kinds.
void make_tree(const TempDir& dir) {
  for (const char* f : {"root/a_cat/1.JpG", "root/a_cat/nested/deep/2.webp", "root/a_cat/x.jpg.txt",
                        "root/b_dog/z.jpg", "root/b_dog/a.PNG", "root/b_dog/.hidden.jpg",
                        "root/b_dog/notes.txt", "root/b_dog/sub/c.jpeg", "root/b_dog/sub-x/d.jpg",
                        "root/b_dog/sub/inner/e.tiff", "root/readme.jpg", "outside/x.bmp"}) {
    touch(dir, f);
  }
  fs::create_directory_symlink("../..", dir.path() / "root/b_dog/sub/inner/up");  // -> b_dog
  fs::create_directory_symlink("../outside", dir.path() / "root/c_link");
}
}  // namespace

TEST_CASE("image_folder lists (path, label) in torchvision's order", "[sources][image_folder]") {
  TempDir dir;
  make_tree(dir);
  const std::string root = dir / "root";
  const auto ds = image_folder(root);
  CHECK(ds.class_names() == std::vector<std::string>{"a_cat", "b_dog", "c_link"});
  // Directories in the order of their path strings ("sub-x" < "sub/inner"),
  // files sorted by name in each; hidden files kept, extensions matched
  // ignoring case, the link back to b_dog not followed again.
  const Samples expected{
      {root + "/a_cat/1.JpG", 0},       {root + "/a_cat/nested/deep/2.webp", 0},
      {root + "/b_dog/.hidden.jpg", 1}, {root + "/b_dog/a.PNG", 1},
      {root + "/b_dog/z.jpg", 1},       {root + "/b_dog/sub/c.jpeg", 1},
      {root + "/b_dog/sub-x/d.jpg", 1}, {root + "/b_dog/sub/inner/e.tiff", 1},
      {root + "/c_link/x.bmp", 2},
  };
  CHECK(testing::collect(ds) == expected);
  CHECK(ds.cardinality() == 9);
  CHECK(testing::collect(ds) == expected);  // every pass
  CHECK(testing::collect(image_folder(root + "/")) == expected);

  // Batches: the paths as a vector, the labels as an int64 tensor.
  const auto batches = testing::collect(ds.batch(4));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].first == std::vector<std::string>{expected[0].first, expected[1].first,
                                                     expected[2].first, expected[3].first});
  CHECK(testing::values_of(batches[1].second) == std::vector<std::int64_t>{1, 1, 1, 1});
  // And the bytes through read_file.
  const auto bytes = testing::collect(
      ds.take(1).map([](std::pair<std::string, std::int64_t> s) { return read_file(s.first); }));
  CHECK(bytes == std::vector<std::string>{"root/a_cat/1.JpG"});
}

TEST_CASE("image_folder with other extensions", "[sources][image_folder]") {
  TempDir dir;
  make_tree(dir);
  const std::string root = dir / "root";
  // a_cat has no .txt file (x.jpg.txt does not count for ".jpg", but does for ".TXT").
  CHECK(testing::collect(image_folder(root, {.extensions = {".TXT", ".bmp"}})) ==
        Samples{{root + "/a_cat/x.jpg.txt", 0},
                {root + "/b_dog/notes.txt", 1},
                {root + "/c_link/x.bmp", 2}});
}

TEST_CASE("image_folder errors name the path", "[sources][image_folder]") {
  TempDir dir;
  make_tree(dir);
  const std::string root = dir / "root";
  CHECK_THROWS_AS(image_folder(dir / "missing"), IoError);
  CHECK_THROWS_WITH(image_folder(dir / "missing"), Catch::Contains(dir / "missing"));
  CHECK_THROWS_AS(image_folder(root + "/readme.jpg"), IoError);
  CHECK_THROWS_WITH(image_folder(root + "/readme.jpg"), Catch::Contains("not a directory"));
  // No class directory: only files.
  CHECK_THROWS_WITH(image_folder(root + "/a_cat/nested/deep"),
                    Catch::Contains("no class directory in " + root + "/a_cat/nested/deep"));
  // A class with no accepted file, as torchvision's FileNotFoundError.
  touch(dir, "root/d_empty/readme.md");
  try {
    image_folder(root);
    FAIL("no error for an empty class");
  } catch (const IoError& e) {
    CHECK(e.context().file == root + "/d_empty");
    CHECK_THAT(e.what(), Catch::Contains("no file with an accepted extension"));
  }
  CHECK_THROWS_WITH(image_folder(root, {.extensions = {".webp"}}),
                    Catch::Contains(root + "/b_dog, " + root + "/c_link, " + root + "/d_empty"));
}
