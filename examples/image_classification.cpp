// An image classification input pipeline, as torchvision's ImageFolder +
// RandomResizedCrop + RandomHorizontalFlip + ToTensor + Normalize in a
// DataLoader: image_folder -> shuffle -> random_map (read the file, decode
// only the crop's window, flip) -> batch (normalising each image to CHW
// float32 in its slot) -> prefetch -> HostLoader. The augmentation's randomness comes from (seed,
// epoch, element position), so two runs give the same batches whatever the threads.
//
//   image_classification ROOT      ROOT/<class>/<image>.jpg|.png, as ImageFolder
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <ingest/image/image.hpp>
#include <ingest/ingest.hpp>
#include <ingest/loader.hpp>

namespace img = ingest::image;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s IMAGE_FOLDER_ROOT\n", argv[0]);
    return 2;
  }
  const auto files = ingest::image_folder(argv[1]);
  const auto train =
      files.shuffle(10'000, {.seed = 1})
          .random_map(
              [](std::pair<std::string, std::int64_t> item, ingest::Rng& rng) {
                const std::string bytes = ingest::read_file(item.first);
                const ingest::Tensor crop = img::random_resized_crop(
                    bytes, {.size = {224, 224}, .decode = {.channels = 3}}, rng);
                // Normalised by batch() into the image's slot of the batch.
                return std::make_pair(
                    img::normalize_in_batch(img::random_flip_left_right(crop, rng),
                                            {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f},
                                            {.layout = img::Layout::chw}),
                    item.second);
              },
              {.seed = 42, .parallelism = ingest::autotune})
          .batch(32)
          .prefetch(ingest::autotune)
          .repeat(2);

  std::int64_t batches = 0, images = 0, label_sum = 0;
  double pixel_sum = 0;
  for (const ingest::HostBatch& batch : ingest::HostLoader(train, {.depth = 2})) {
    batch.wait();
    if (batches == 0) {
      const ingest::Shape& shape = batch.field(0).shape();
      std::printf("first batch: images [%lld, %lld, %lld, %lld] float32, labels [%lld]\n",
                  static_cast<long long>(shape[0]), static_cast<long long>(shape[1]),
                  static_cast<long long>(shape[2]), static_cast<long long>(shape[3]),
                  static_cast<long long>(batch.field(1).shape()[0]));
    }
    for (const float v : batch.field(0).values<float>()) pixel_sum += v;
    for (const std::int64_t label : batch.field(1).values<std::int64_t>()) label_sum += label;
    images += batch.field(1).shape()[0];
    ++batches;
  }
  std::printf("classes:");
  for (const std::string& name : files.class_names()) std::printf(" %s", name.c_str());
  std::printf("\n2 epochs: %lld images in %lld batches, label sum %lld, mean pixel %.3f\n",
              static_cast<long long>(images), static_cast<long long>(batches),
              static_cast<long long>(label_sum),
              pixel_sum / (static_cast<double>(images) * 3 * 224 * 224));
  return images > 0 ? 0 : 1;
}
