// image_folder(root, {.extensions}): the (path, label) pairs of a directory of
// class directories, as torchvision's ImageFolder lists them (tf counterpart:
// tf.keras.utils.image_dataset_from_directory). The directory is walked once,
// when the dataset is built; iterating copies pairs out of a list shared by
// every copy and iterator (from_vector's iterator), so the cardinality is known.
//
// Exactly torchvision's order: classes are root's immediate sub-directories
// (symbolic links to directories included), sorted by name, labelled 0, 1, ...
// in that order; each class directory is walked recursively following
// symbolic links (os.walk(followlinks=True)), its directories visited in
// the order of their path strings (sorted(os.walk(...))) and the files of
// each sorted by name; names compare bytewise, as Python compares str.
// A file is kept when its name ends with one of .extensions, ignoring ASCII
// case. As in torchvision, hidden files and directories are not skipped, and
// a non-directory entry (a broken link, a pipe) with a matching name is kept:
// reading it fails later. Unlike torchvision, a directory reached again
// through a link to one of its ancestors is not walked again (os.walk loops
// until paths grow too long), and a directory that cannot be read raises
// IoError instead of being skipped silently.
//
// A URL root ("s3://bucket/train") is listed through its scheme (for s3://,
// ListObjectsV2 under "train/", every page): the classes are the first key
// components below the root, and each class's objects are ordered as the
// walk orders files (by their "directory", then by name).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/from_vector.hpp"
#include "ingest/storage/byte_source.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// Options of image_folder.
struct ImageFolderOptions {
  /// File name endings to keep, compared ignoring ASCII case; by default
  /// torchvision's IMG_EXTENSIONS.
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                         ".pgm", ".tif",  ".tiff", ".webp"};
};

namespace detail {

/// Whether `name` ends with one of `extensions`, ignoring ASCII case
/// (torchvision: filename.lower().endswith(extensions)).
inline bool has_extension(std::string_view name, const std::vector<std::string>& extensions) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  return std::any_of(extensions.begin(), extensions.end(), [&](const std::string& ext) {
    return ext.size() <= name.size() &&
           std::equal(ext.begin(), ext.end(), name.end() - static_cast<std::ptrdiff_t>(ext.size()),
                      [&](char a, char b) { return lower(a) == lower(b); });
  });
}

/// One directory's entries: sub-directories (links to them included) and the
/// other entries, each sorted by name. Throws IoError naming `dir`.
struct DirectoryListing {
  std::vector<std::string> dirs, files;
};
inline DirectoryListing list_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  DirectoryListing out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code sec;
    const bool is_dir = it->is_directory(sec);  // follows links; a broken link is a file
    (is_dir ? out.dirs : out.files).push_back(it->path().filename().string());
  }
  if (ec) throw io_error("image_folder", dir, "cannot list directory", ec.value());
  std::sort(out.dirs.begin(), out.dirs.end());
  std::sort(out.files.begin(), out.files.end());
  return out;
}

inline std::string join_path(const std::string& dir, const std::string& name) {
  return !dir.empty() && dir.back() == '/' ? dir + name : dir + "/" + name;
}

/// Appends (directory, its kept file names) for `dir` and every directory
/// below it; `ancestors` (device, inode) stops cycles through links.
inline void walk_class(const std::string& dir, const std::vector<std::string>& extensions,
                       std::vector<std::pair<dev_t, ino_t>>& ancestors,
                       std::vector<std::pair<std::string, std::vector<std::string>>>& out) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw io_error("image_folder", dir, "cannot stat", errno);
  const std::pair<dev_t, ino_t> id(st.st_dev, st.st_ino);
  if (std::find(ancestors.begin(), ancestors.end(), id) != ancestors.end()) return;
  DirectoryListing listing = list_directory(dir);
  std::erase_if(listing.files, [&](const std::string& f) { return !has_extension(f, extensions); });
  out.emplace_back(dir, std::move(listing.files));
  ancestors.push_back(id);
  for (const std::string& sub : listing.dirs)
    walk_class(join_path(dir, sub), extensions, ancestors, out);
  ancestors.pop_back();
}

/// image_folder's classes and samples under a URL root, from one listing of
/// the objects below it (see the top of this header).
inline void list_url_classes(const std::string& root, const std::vector<std::string>& extensions,
                             std::vector<std::string>& classes,
                             std::vector<std::pair<std::string, std::int64_t>>& samples,
                             std::vector<std::string>& empty) {
  const std::string prefix = !root.empty() && root.back() == '/' ? root : root + "/";
  // Per class, sorted by name: (directory, name) of each kept object.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_class;
  for (const std::string& url :
       storage::scheme_for(root, "image_folder")->list(prefix, "image_folder")) {
    const std::string_view rest = std::string_view(url).substr(prefix.size());
    const auto first = rest.find('/');
    if (first == std::string_view::npos || first == 0) continue;  // not inside a class
    auto& files = by_class[std::string(rest.substr(0, first))];   // a class even if none is kept
    const auto last = url.rfind('/');
    const std::string name = url.substr(last + 1);
    if (!name.empty() && has_extension(name, extensions))
      files.emplace_back(url.substr(0, last), name);
  }
  std::size_t label = 0;
  for (auto& [cls, files] : by_class) {
    classes.push_back(cls);
    std::sort(files.begin(), files.end());  // directories in path order, then names
    for (const auto& [dir, name] : files) {
      samples.emplace_back(dir + "/" + name, static_cast<std::int64_t>(label));
    }
    if (files.empty()) empty.push_back(prefix + cls);
    ++label;
  }
}

}  // namespace detail

/// The dataset of `image_folder(root, options)`: the `(path, label)` pairs of a directory of
/// class directories, in torchvision's ImageFolder order.
class ImageFolderDataset
    : public DatasetBase<ImageFolderDataset, std::pair<std::string, std::int64_t>> {
 public:
  /// `(path, label)`: a file's path and its class's index in class_names().
  using element_type = std::pair<std::string, std::int64_t>;
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "image_folder";

  /// Walks `root`. Throws IoError naming the path when root is missing or not
  /// a directory, has no class directory, or a class has no kept file (as
  /// torchvision's FileNotFoundError), or a directory cannot be read.
  ImageFolderDataset(const std::string& root, const ImageFolderOptions& options) {
    if (storage::is_url(root)) {
      std::vector<std::string> classes, empty;
      std::vector<element_type> samples;
      detail::list_url_classes(root, options.extensions, classes, samples, empty);
      if (classes.empty()) {
        throw IoError("image_folder: no class directory in " + root,
                      {.stage = "image_folder", .file = root});
      }
      finish(std::move(classes), std::move(samples), empty);
      return;
    }
    std::error_code ec;
    const auto status = std::filesystem::status(root, ec);
    if (ec || !std::filesystem::exists(status)) {
      throw detail::io_error("image_folder", root, "cannot open root directory",
                             ec ? ec.value() : ENOENT);
    }
    if (!std::filesystem::is_directory(status)) {
      throw detail::io_error("image_folder", root, "root is not a directory", ENOTDIR);
    }
    std::vector<std::string> classes = detail::list_directory(root).dirs;
    if (classes.empty()) {
      throw IoError("image_folder: no class directory in " + root,
                    {.stage = "image_folder", .file = root});
    }
    std::vector<element_type> samples;
    std::vector<std::string> empty;
    for (std::size_t label = 0; label < classes.size(); ++label) {
      const std::string class_dir = detail::join_path(root, classes[label]);
      std::vector<std::pair<std::string, std::vector<std::string>>> dirs;
      std::vector<std::pair<dev_t, ino_t>> ancestors;
      detail::walk_class(class_dir, options.extensions, ancestors, dirs);
      std::sort(dirs.begin(), dirs.end());  // torchvision: sorted(os.walk(class_dir))
      const std::size_t before = samples.size();
      for (const auto& [dir, files] : dirs) {
        for (const std::string& f : files) {
          samples.emplace_back(detail::join_path(dir, f), static_cast<std::int64_t>(label));
        }
      }
      if (samples.size() == before) empty.push_back(class_dir);
    }
    finish(std::move(classes), std::move(samples), empty);
  }

  /// An iterator over the pairs found when the dataset was built.
  FromVectorIterator<element_type> make_iterator(const IteratorContext&) const {
    return FromVectorIterator<element_type>(samples_);
  }

  /// The class directory names, sorted; a label indexes this list.
  const std::vector<std::string>& class_names() const noexcept { return *classes_; }
  /// The number of `(path, label)` pairs.
  std::int64_t cardinality() const { return static_cast<std::int64_t>(samples_->size()); }

  /// The samples found (a folder that changed is another data set: its
  /// states do not restore here).
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(samples_->size()));
    for (const auto& [path, label] : *samples_) fp.add(path).add(label);
  }

 private:
  // Keeps the walk's result, or raises the error for its empty classes.
  void finish(std::vector<std::string> classes, std::vector<element_type> samples,
              const std::vector<std::string>& empty) {
    if (!empty.empty()) {
      std::string names;
      for (const std::string& dir : empty) names += (names.empty() ? "" : ", ") + dir;
      throw IoError(
          "image_folder: no file with an accepted extension in the class directories " + names,
          {.stage = "image_folder", .file = empty.front()});
    }
    classes_ = std::make_shared<const std::vector<std::string>>(std::move(classes));
    samples_ = std::make_shared<const std::vector<element_type>>(std::move(samples));
  }

  std::shared_ptr<const std::vector<std::string>> classes_;
  std::shared_ptr<const std::vector<element_type>> samples_;
};

/// The (path, label) pairs under `root`'s class directories, in torchvision
/// ImageFolder's order (see the top of this header).
inline ImageFolderDataset image_folder(const std::string& root, ImageFolderOptions options = {}) {
  return ImageFolderDataset(root, options);
}

}  // namespace ingest
