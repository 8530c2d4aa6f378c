// Writes a small ImageFolder-style data set for the image_classification
// example's test: ROOT/<class>/<n>.jpg (TurboJPEG, photo-like content of
// several sizes), 20 images in each of 3 classes.
//
//   make_image_folder ROOT
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/images.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ROOT\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root = argv[1];
  std::filesystem::remove_all(root);
  const char* classes[] = {"cat", "dog", "fish"};
  std::uint32_t seed = 1;
  for (const char* name : classes) {
    std::filesystem::create_directories(root / name);
    for (int i = 0; i < 20; ++i, ++seed) {
      // Sizes vary as photographs do; some crops then decode at a DCT scale.
      const int width = 240 + 40 * (i % 5), height = 200 + 60 * (i % 4);
      const std::string jpeg =
          ingest::testing::tj_encode(width, height, TJSAMP_420, 90, false, seed);
      std::ofstream((root / name / (std::to_string(i) + ".jpg")).string(), std::ios::binary)
          .write(jpeg.data(), static_cast<std::streamsize>(jpeg.size()));
    }
  }
  std::printf("wrote 60 JPEGs in 3 classes under %s\n", root.c_str());
  return 0;
}
