// Type erasure, in exactly one opt-in place: AnyDataset<T> holds any dataset
// of T behind one virtual interface, for storing pipelines, returning them
// across translation units or choosing between pipelines of different types.
// tf.data counterpart: every tf.data dataset is erased; here only this one is.
// The erased iterator also offers bulk fill() (one virtual call per chunk), so
// a batch after the erasure boundary does not pay a virtual call per element.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/pipeline.hpp"

namespace ingest {

/// An iterator of T of any concrete type.
template <class T>
class AnyIterator {
 public:
  /// The element type.
  using value_type = T;

  // The self-type check comes first so that checking the concept on
  // AnyIterator itself does not recurse into this constructor.
  /// Erases `it`, taking ownership of it.
  template <class It>
  requires(!std::is_same_v<std::remove_cvref_t<It>, AnyIterator>) &&
      iterator<It>&& std::is_same_v<typename It::value_type, T> explicit AnyIterator(It it)
      : impl_(std::make_unique<Model<It>>(std::move(it))) {}

  /// The next element of the erased iterator (one virtual call), or std::nullopt at the end.
  std::optional<T> next() {
    std::optional<T> out;
    impl_->next(out);
    return out;
  }
  /// Bulk protocol: forwarded to the erased iterator (one virtual call per chunk).
  std::size_t fill(std::span<T> out) { return impl_->fill(out); }
  /// Checkpoint: forwarded to the erased iterator.
  void save(StateWriter& w) const { impl_->save(w); }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) { impl_->restore(r); }

 private:
  struct Concept {
    virtual ~Concept() = default;
    // Writes into the caller's optional rather than returning one: returned
    // through the stack, GCC stores the engaged flag as a byte and reloads it
    // as a word, a store-forwarding stall that cost ~10 ns per element.
    virtual void next(std::optional<T>& out) = 0;
    virtual std::size_t fill(std::span<T> out) = 0;
    virtual void save(StateWriter& w) const = 0;
    virtual void restore(StateReader& r) = 0;
  };

  template <class It>
  struct Model final : Concept {
    explicit Model(It i) : it(std::move(i)) {}
    void next(std::optional<T>& out) override {
      deferred.rethrow_if_any();
      // Value and flag written separately: `out = it.next()` copies the
      // optional through a 16-byte load of the parts just stored (a stall).
      if (std::optional<T> x = it.next()) out.emplace(std::move(*x));
    }
    std::size_t fill(std::span<T> out) override {
      if constexpr (bulk_iterator<It>) {
        if (deferred) return 0;
        return it.fill(out);
      } else if constexpr (!std::is_move_assignable_v<T>) {
        return 0;
      } else {
        // Give any iterator the bulk protocol: an element's error stops the
        // chunk and is rethrown by the next call to next().
        std::size_t n = 0;
        if (deferred) return 0;
        try {
          while (n < out.size()) {
            auto x = it.next();
            if (!x) break;
            out[n++] = std::move(*x);
          }
        } catch (...) {
          deferred.defer(std::current_exception());
        }
        return n;
      }
    }
    void save(StateWriter& w) const override {
      if (deferred) {
        throw Unimplemented(
            "checkpoint: stage 'erase' cannot be saved while an element's error is pending",
            {.stage = "erase"});
      }
      if constexpr (checkpointable_iterator<It>) {
        it.save(w);
      } else {
        throw Unimplemented("checkpoint: an erased iterator cannot be saved", {.stage = "erase"});
      }
    }
    void restore(StateReader& r) override {
      if constexpr (checkpointable_iterator<It>) {
        it.restore(r);
      } else {
        throw Unimplemented("checkpoint: an erased iterator cannot be restored",
                            {.stage = "erase"});
      }
    }
    It it;
    detail::DeferredError deferred;
  };

  std::unique_ptr<Concept> impl_;
};

/// A dataset of T of any concrete type. Copies share the erased dataset.
/// Default-constructed, it is empty (no elements, cardinality 0), so it can
/// be declared first and assigned later: `AnyDataset<T> ds; ds = range(3);`.
template <class T>
class AnyDataset : public DatasetBase<AnyDataset<T>, T> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "erase";  // its row in stats()

  /// An empty dataset.
  AnyDataset() = default;

  /// Erases `d`; implicit, so `AnyDataset<T> ds = range(10).map(f);` works.
  template <class D>
  requires(!std::is_same_v<std::remove_cvref_t<D>, AnyDataset>) &&
      dataset<D>&& std::is_same_v<typename D::element_type, T> AnyDataset(D d)
      : impl_(std::make_shared<const Model<D>>(std::move(d))) {
  }  // NOLINT(google-explicit-constructor)

  /// An iterator of the erased dataset in `ctx` (an empty one for an empty dataset).
  AnyIterator<T> make_iterator(const IteratorContext& ctx) const {
    if (!impl_) return AnyIterator<T>(detail::EmptyIterator<T>{});
    return impl_->make_iterator(ctx);
  }
  /// The erased dataset's cardinality (see DatasetBase::cardinality); 0 when empty.
  std::int64_t cardinality() const { return impl_ ? impl_->cardinality() : 0; }
  /// The erased dataset's fingerprint (see detail::fingerprint_of).
  void fingerprint(Fingerprint& fp) const {
    if (impl_) {
      impl_->fingerprint(fp);
    } else {
      fp.add("empty");
    }
  }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual AnyIterator<T> make_iterator(const IteratorContext& ctx) const = 0;
    virtual std::int64_t cardinality() const = 0;
    virtual void fingerprint(Fingerprint& fp) const = 0;
  };
  template <class D>
  struct Model final : Concept {
    explicit Model(D d) : ds(std::move(d)) {}
    AnyIterator<T> make_iterator(const IteratorContext& ctx) const override {
      return AnyIterator<T>(detail::child_iterator(ds, ctx));
    }
    std::int64_t cardinality() const override { return detail::cardinality_of(ds); }
    void fingerprint(Fingerprint& fp) const override { detail::fingerprint_of(ds, fp); }
    D ds;
  };

  std::shared_ptr<const Concept> impl_;
};

}  // namespace ingest
