// list_files(pattern, {.shuffle, .seed}): the paths matching a glob pattern,
// as a dataset of std::string, sorted unless shuffled. tf.data counterpart:
// Dataset.list_files (which shuffles by default; ingest sorts unless asked).
// The pattern is matched once, when the dataset is built: `*`, `?` and
// `[...]` (ranges, `!` or `^` to negate) may appear in any path component,
// `\` escapes. As in a shell, wildcards do not match a leading '.', so hidden
// files (and TFRecordWriter's temporary files) are not listed. A URL pattern
// ("s3://bucket/train-*.tfrecord") lists the objects of its scheme (see
// storage/byte_source.hpp). No match throws InvalidArgument naming the pattern.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/random.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/storage/byte_source.hpp"

namespace ingest {

/// Options of list_files.
struct ListFilesOptions {
  /// Shuffle the paths instead of sorting them.
  bool shuffle = false;
  /// Seed of the shuffle; none draws one from the OS (ingest::random_seed).
  std::optional<std::uint64_t> seed = {};
  /// With shuffle: a new order each pass (each epoch), still determined by the seed.
  bool reshuffle_each_iteration = true;
};

namespace detail {

/// fnmatch-style matching of one path component: `*`, `?`, `[...]`, `\` escapes.
inline bool glob_match(std::string_view pattern, std::string_view name) {
  if (!name.empty() && name[0] == '.' && (pattern.empty() || pattern[0] != '.')) {
    // Wildcards do not match a leading dot.
    if (!pattern.empty() && (pattern[0] == '*' || pattern[0] == '?' || pattern[0] == '[')) {
      return false;
    }
  }
  std::size_t p = 0, n = 0;
  std::size_t star_p = std::string_view::npos, star_n = 0;
  while (n < name.size()) {
    bool matched = false;
    std::size_t next_p = p;
    if (p < pattern.size()) {
      const char c = pattern[p];
      if (c == '*') {
        star_p = ++p;
        star_n = n;
        continue;
      }
      if (c == '?') {
        matched = true;
        next_p = p + 1;
      } else if (c == '[') {
        std::size_t q = p + 1;
        bool negate = false;
        if (q < pattern.size() && (pattern[q] == '!' || pattern[q] == '^')) {
          negate = true;
          ++q;
        }
        bool in = false, closed = false;
        const std::size_t first = q;
        while (q < pattern.size()) {
          if (pattern[q] == ']' && q > first) {
            closed = true;
            break;
          }
          char lo = pattern[q];
          if (lo == '\\' && q + 1 < pattern.size()) lo = pattern[++q];
          char hi = lo;
          if (q + 2 < pattern.size() && pattern[q + 1] == '-' && pattern[q + 2] != ']') {
            hi = pattern[q + 2];
            if (hi == '\\' && q + 3 < pattern.size()) hi = pattern[++q + 2];
            q += 2;
          }
          if (lo <= name[n] && name[n] <= hi) in = true;
          ++q;
        }
        if (closed) {
          matched = in != negate;
          next_p = q + 1;
        } else {
          matched = name[n] == '[';  // an unclosed bracket is literal
          next_p = p + 1;
        }
      } else {
        char lit = c;
        next_p = p + 1;
        if (c == '\\' && p + 1 < pattern.size()) {
          lit = pattern[p + 1];
          next_p = p + 2;
        }
        matched = lit == name[n];
      }
    }
    if (matched) {
      p = next_p;
      ++n;
    } else if (star_p != std::string_view::npos) {
      p = star_p;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

inline bool has_wildcard(std::string_view component) {
  return component.find_first_of("*?[\\") != std::string_view::npos;
}

// Removes the escapes of a component without wildcards.
inline std::string unescape_glob(std::string_view component) {
  std::string out;
  for (std::size_t i = 0; i < component.size(); ++i) {
    if (component[i] == '\\' && i + 1 < component.size()) ++i;
    out += component[i];
  }
  return out;
}

/// The '/'-separated components of `path`, empty ones kept.
inline std::vector<std::string_view> split_components(std::string_view path) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) return parts;
    path.remove_prefix(slash + 1);
  }
}

/// Every object whose URL matches the URL `pattern`, sorted: the scheme
/// lists the objects under the pattern's part before its first wildcard
/// (for s3://, ListObjectsV2 with that prefix, every page), and each
/// '/'-separated component is matched as a local path's are.
inline std::vector<std::string> glob_url(const std::string& pattern) {
  const std::size_t wild = pattern.find_first_of("*?[\\");
  std::vector<std::string> found;
  if (wild == std::string::npos) {
    found.push_back(pattern);  // no wildcard: the object itself, checked when opened
    return found;
  }
  const auto want = split_components(pattern);
  for (std::string& url :
       storage::scheme_for(pattern, "list_files")->list(pattern.substr(0, wild), "list_files")) {
    const auto have = split_components(url);
    if (have.size() != want.size()) continue;
    bool match = true;
    for (std::size_t i = 0; match && i < want.size(); ++i) match = glob_match(want[i], have[i]);
    if (match) found.push_back(std::move(url));
  }
  std::sort(found.begin(), found.end());
  return found;
}

/// Every existing file (not directory) matching `pattern`, sorted; for a
/// URL, every matching object (glob_url).
inline std::vector<std::string> glob(const std::string& pattern) {
  if (storage::is_url(pattern)) return glob_url(pattern);
  namespace fs = std::filesystem;
  std::vector<std::string_view> parts;
  std::string_view rest = pattern;
  const bool absolute = !rest.empty() && rest[0] == '/';
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  std::vector<std::string> current{absolute ? "/" : ""};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    std::vector<std::string> next;
    for (const std::string& dir : current) {
      const std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
      std::error_code ec;
      if (!has_wildcard(parts[i])) {
        std::string candidate = prefix + unescape_glob(parts[i]);
        const auto status = fs::status(candidate, ec);
        if (ec) continue;
        if (last ? (fs::exists(status) && !fs::is_directory(status)) : fs::is_directory(status)) {
          next.push_back(std::move(candidate));
        }
        continue;
      }
      const fs::path base = dir.empty() ? fs::path(".") : fs::path(dir);
      for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!glob_match(parts[i], name)) continue;
        std::error_code sec;
        const bool is_dir = it->is_directory(sec);
        if (sec || is_dir == last) continue;
        next.push_back(prefix + name);
      }
    }
    current = std::move(next);
  }
  if (parts.empty()) current.clear();
  std::sort(current.begin(), current.end());
  current.erase(std::unique(current.begin(), current.end()), current.end());
  return current;
}

/// std::mt19937_64 (the standard fixes its sequence: this one is the same),
/// without <random>'s cost to every program including the umbrella header.
class Mt19937_64 {
 public:
  explicit Mt19937_64(std::uint64_t seed) noexcept {
    x_[0] = seed;
    for (std::size_t i = 1; i < n; ++i)
      x_[i] = 6364136223846793005ULL * (x_[i - 1] ^ (x_[i - 1] >> 62)) + i;
  }
  std::uint64_t operator()() noexcept {
    if (i_ >= n) twist();
    std::uint64_t y = x_[i_++];
    y ^= (y >> 29) & 0x5555555555555555ULL;
    y ^= (y << 17) & 0x71d67fffeda60000ULL;
    y ^= (y << 37) & 0xfff7eee000000000ULL;
    return y ^ (y >> 43);
  }

 private:
  static constexpr std::size_t n = 312, m = 156;
  void twist() noexcept {
    constexpr std::uint64_t upper = ~std::uint64_t{0} << 31, lower = ~upper;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint64_t y = (x_[k] & upper) | (x_[(k + 1) % n] & lower);
      x_[k] = x_[(k + m) % n] ^ (y >> 1) ^ ((y & 1) ? 0xb5026f5aa96619e9ULL : 0);
    }
    i_ = 0;
  }
  std::uint64_t x_[n];
  std::size_t i_ = n;
};

/// A uniform integer in [0, n) (rejection sampling), the same on every
/// platform, unlike std::uniform_int_distribution.
inline std::uint64_t bounded_random(Mt19937_64& rng, std::uint64_t n) {
  const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
  for (;;) {
    const std::uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

/// Fisher-Yates shuffle with bounded_random: a seed gives the same order everywhere.
template <class T>
void seeded_shuffle(std::vector<T>& v, std::uint64_t seed) {
  Mt19937_64 rng(seed);
  for (std::size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[bounded_random(rng, i)]);
  }
}

class ListFilesIterator {
 public:
  using value_type = std::string;

  explicit ListFilesIterator(std::shared_ptr<const std::vector<std::string>> paths)
      : paths_(std::move(paths)), names_hash_(hash_names(*paths_)) {}
  /// Shuffled by `seed`; with `passes` (reshuffle_each_iteration), `seed` is
  /// the base seed, this iterator's order is that of pass `pass`, and
  /// `passes` is the dataset's pass counter (set on restore).
  ListFilesIterator(std::shared_ptr<const std::vector<std::string>> paths, std::uint64_t seed,
                    std::shared_ptr<std::atomic<std::uint64_t>> passes = nullptr,
                    std::uint64_t pass = 0)
      : paths_(std::move(paths)),
        seed_(seed),
        passes_(std::move(passes)),
        pass_(pass),
        names_hash_(hash_names(*paths_)) {
    order_.resize(paths_->size());
    shuffle();
  }

  /// The seed of pass `pass` of a reshuffling list_files with base `seed`.
  static std::uint64_t pass_seed(std::uint64_t seed, std::uint64_t pass) noexcept {
    return seed ^ (pass + 1) * 0x9e3779b97f4a7c15ull;  // a distinct stream per pass
  }

  /// Checkpoint: the files matched (their number and a hash of their
  /// names), the position and the pass (which reshuffle this order is).
  /// Restore checks that the same files match (else DataLossError: files
  /// appeared or vanished since the save), re-shuffles for that pass and sets
  /// the dataset's pass counter after it, so the passes that follow reshuffle
  /// as they would have.
  void save(StateWriter& w) const { w.write(paths_->size(), names_hash_, pos_, pass_); }
  void restore(StateReader& r) {
    const std::uint64_t at = r.offset();
    std::uint64_t count = 0, hash = 0;
    r.read(count, hash);
    if (count != paths_->size() || hash != names_hash_) {
      throw DataLossError(
          "checkpoint: list_files: the files matching its patterns changed since "
          "the save (" +
              std::to_string(count) + " then, " + std::to_string(paths_->size()) + " now" +
              (count == paths_->size() ? ", other names" : "") + ")",
          {.stage = "list_files", .offset = at});
    }
    pos_ = r.read_position(paths_->size(), "list_files", "files");
    std::uint64_t pass = 0;
    r.read(pass);
    if (passes_) {
      if (pass != pass_) {
        pass_ = pass;
        shuffle();
      }
      detail::restored_pass(passes_, pass);
    }
  }

  std::optional<std::string> next() {
    if (pos_ == paths_->size()) return std::nullopt;
    const std::size_t i = order_.empty() ? pos_ : order_[pos_];
    pos_ = std::min(pos_ + stride_, paths_->size());
    return (*paths_)[i];
  }

  /// Yields the files at positions first, first + stride, ... of its order
  /// only (with_options({.auto_shard}) by file); before the first next().
  void deal(std::size_t first, std::size_t stride) noexcept {
    stride_ = stride;
    pos_ = std::min(first, paths_->size());
  }

 private:
  static std::uint64_t hash_names(const std::vector<std::string>& paths) noexcept {
    Fingerprint names;
    for (const std::string& p : paths) names.add(p);
    return names.value();
  }

  void shuffle() {
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    seeded_shuffle(order_, passes_ ? pass_seed(seed_, pass_) : seed_);
  }

  std::shared_ptr<const std::vector<std::string>> paths_;
  std::vector<std::size_t> order_;  // empty: sorted order
  std::size_t pos_ = 0;
  std::size_t stride_ = 1;  // auto_shard by file: the world's size
  std::uint64_t seed_ = 0;
  std::shared_ptr<std::atomic<std::uint64_t>> passes_;  // reshuffling: the dataset's counter
  std::uint64_t pass_ = 0;
  std::uint64_t names_hash_ = 0;  // of the matched paths, for checkpoints
};

}  // namespace detail

/// The dataset of `list_files(pattern, options)`: the paths matching glob patterns, sorted
/// unless shuffled.
class ListFilesDataset : public DatasetBase<ListFilesDataset, std::string> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "list_files";

  /// Matches `patterns` now (the union of their matches, sorted, without duplicates); throws
  /// InvalidArgument naming a pattern that matches nothing.
  ListFilesDataset(const std::vector<std::string>& patterns, ListFilesOptions options)
      : patterns_(patterns),
        options_(options),
        epoch_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    std::vector<std::string> all;
    for (const std::string& pattern : patterns) {
      std::vector<std::string> found = detail::glob(pattern);
      if (found.empty()) {
        throw InvalidArgument("list_files: no files match the pattern '" + pattern + "'",
                              {.stage = "list_files", .file = pattern});
      }
      all.insert(all.end(), found.begin(), found.end());
    }
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    paths_ = std::make_shared<const std::vector<std::string>>(std::move(all));
    seed_given_ = options_.seed.has_value();
    if (options_.shuffle && !options_.seed)
      options_.seed = static_cast<std::uint32_t>(random_seed());
  }

  /// An iterator over the paths (in a new order each pass when shuffled; with with_options'
  /// auto_shard above, only this rank's files; then a shuffle needs a seed, else InvalidArgument).
  detail::ListFilesIterator make_iterator(const IteratorContext& ctx) const {
    detail::ListFilesIterator it = iterator_in(ctx);
    if (const auto first = detail::auto_shard_by_file(ctx, paths_->size(), "list_files")) {
      if (options_.shuffle && !seed_given_) {
        throw InvalidArgument(
            "list_files: with_options({.auto_shard}) deals the shuffled files to the ranks, so "
            "every rank needs the same order: give list_files a seed",
            {.stage = "list_files"});
      }
      it.deal(*first, static_cast<std::size_t>(ctx.auto_shard->world.world_size));
    }
    return it;
  }

  /// The patterns and the shuffle options (a seed drawn from the OS differs
  /// between processes: such a state restores only into this dataset). The
  /// files they match are checked by the state itself: files that appeared
  /// or vanished since the save are DataLossError, not another pipeline.
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(patterns_.size()));
    for (const std::string& p : patterns_) fp.add(p);
    fp.add(options_.shuffle).add(options_.reshuffle_each_iteration);
    fp.add(options_.seed.value_or(0));
    fp.counter(epoch_);
  }

  /// The matched paths, sorted.
  const std::vector<std::string>& matched() const noexcept { return *paths_; }

 private:
  std::vector<std::string> patterns_;
  std::shared_ptr<const std::vector<std::string>> paths_;
  ListFilesOptions options_;
  std::shared_ptr<std::atomic<std::uint64_t>> epoch_;  // passes so far, shared by copies
  bool seed_given_ = false;

  detail::ListFilesIterator iterator_in(const IteratorContext& ctx) const {
    if (!options_.shuffle) return detail::ListFilesIterator(paths_);
    if (options_.reshuffle_each_iteration) {
      auto epoch = detail::shared_counter(ctx, epoch_);
      const std::uint64_t pass = epoch->fetch_add(1, std::memory_order_relaxed);
      return detail::ListFilesIterator(paths_, *options_.seed, std::move(epoch), pass);
    }
    return detail::ListFilesIterator(paths_, *options_.seed);
  }
};

/// The files matching `pattern`, sorted unless options.shuffle (tf: Dataset.list_files).
/// Throws InvalidArgument naming the pattern when nothing matches.
inline ListFilesDataset list_files(const std::string& pattern, ListFilesOptions options = {}) {
  return ListFilesDataset({pattern}, options);
}
/// The files matching any of `patterns`, without duplicates; every pattern must match.
inline ListFilesDataset list_files(const std::vector<std::string>& patterns,
                                   ListFilesOptions options = {}) {
  return ListFilesDataset(patterns, options);
}
/// @copydoc list_files(const std::vector<std::string>&, ListFilesOptions)
inline ListFilesDataset list_files(std::initializer_list<std::string> patterns,
                                   ListFilesOptions options = {}) {
  return ListFilesDataset(std::vector<std::string>(patterns), options);
}

}  // namespace ingest
