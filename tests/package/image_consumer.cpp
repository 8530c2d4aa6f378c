// Built against ingest::image (the optional package component): decodes the
// JPEG and PNG files named on the command line and resizes them, so that
// libjpeg-turbo and libspng are found and linked as a user's project would.
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include <ingest/image/image.hpp>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const ingest::image::ImageHeader header = ingest::image::read_header(bytes);
    const ingest::Tensor image = ingest::image::decode_image(bytes, {.channels = 3});
    const ingest::Tensor small = ingest::image::resize(image, {4, 4});
    std::cout << "image consumer: " << argv[i] << " is " << header.height << " x " << header.width
              << ", resized to " << small.shape().to_string() << "\n";
    if (image.dim(0) != header.height || small.dim(2) != 3) return 1;
  }
  return argc > 1 ? 0 : 1;
}
