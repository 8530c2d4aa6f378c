#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <ingest/core/batch_traits.hpp>

using namespace ingest;

namespace {
const BatchSpec spec4{4, &default_allocator()};
}

TEST_CASE("scalars stack into a rank-1 tensor", "[core][batch_traits]") {
  STATIC_REQUIRE(std::is_same_v<batch_t<float>, Tensor>);
  batch_traits<float>::builder b(spec4);
  for (std::size_t i = 0; i < 4; ++i) b.set(i, static_cast<float>(i) * 1.5f);
  Tensor t = std::move(b).finish(4);
  CHECK(t == Tensor::from_values<float>({0.f, 1.5f, 3.f, 4.5f}));
}

TEST_CASE("a partial batch has the count as its leading dimension", "[core][batch_traits]") {
  batch_traits<std::int64_t>::builder b(spec4);
  b.set(0, 7);
  b.set(1, 8);
  Tensor t = std::move(b).finish(2);
  CHECK(t.shape() == Shape{2});
  CHECK(t == Tensor::from_values<std::int64_t>({7, 8}));
}

TEST_CASE("tensors stack with a leading batch dimension", "[core][batch_traits]") {
  batch_traits<Tensor>::builder b(spec4);
  for (int i = 0; i < 4; ++i)
    b.set(static_cast<std::size_t>(i), Tensor::from_values<int>({i, i + 10}));
  Tensor t = std::move(b).finish(4);
  CHECK(t.shape() == Shape{4, 2});
  CHECK(t == Tensor::from_values<int>({0, 10, 1, 11, 2, 12, 3, 13}, Shape{4, 2}));
}

TEST_CASE("tensors of different shape or dtype cannot stack", "[core][batch_traits]") {
  batch_traits<Tensor>::builder b(spec4);
  b.set(0, Tensor::from_values<int>({1, 2}));
  CHECK_THROWS_WITH(b.set(1, Tensor::from_values<int>({1, 2, 3})),
                    Catch::Contains("int32[3] after int32[2]") && Catch::Contains("padded_batch"));
  CHECK_THROWS_AS(b.set(1, Tensor::from_values<float>({1, 2})), InvalidArgument);
}

TEST_CASE("slots may be set concurrently", "[core][batch_traits][concurrency]") {
  const BatchSpec spec{64, &default_allocator()};
  batch_traits<Tensor>::builder b(spec);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&b, w] {
      for (int i = w; i < 64; i += 4) {
        b.set(static_cast<std::size_t>(i), Tensor::from_values<std::int64_t>({i, -i}));
      }
    });
  }
  for (auto& t : threads) t.join();
  Tensor t = std::move(b).finish(64);
  for (std::int64_t i = 0; i < 64; ++i)
    CHECK(t.slice(i) == Tensor::from_values<std::int64_t>({i, -i}));
}

TEST_CASE("other types collect into a vector", "[core][batch_traits]") {
  STATIC_REQUIRE(std::is_same_v<batch_t<std::string>, std::vector<std::string>>);
  batch_traits<std::string>::builder b(spec4);
  b.set(1, "b");
  b.set(0, "a");
  b.set(2, "c");
  CHECK(std::move(b).finish(3) == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("tuples and pairs stack field by field", "[core][batch_traits]") {
  using E = std::tuple<std::int64_t, Tensor, std::string>;
  STATIC_REQUIRE(std::is_same_v<batch_t<E>, std::tuple<Tensor, Tensor, std::vector<std::string>>>);
  batch_traits<E>::builder b(spec4);
  b.set(0, E{1, Tensor::from_values<float>({1.f}), "x"});
  b.set(1, E{2, Tensor::from_values<float>({2.f}), "y"});
  auto [ids, values, names] = std::move(b).finish(2);
  CHECK(ids == Tensor::from_values<std::int64_t>({1, 2}));
  CHECK(values == Tensor::from_values<float>({1.f, 2.f}, Shape{2, 1}));
  CHECK(names == std::vector<std::string>{"x", "y"});

  using P = std::pair<double, std::string>;
  batch_traits<P>::builder pb(spec4);
  pb.set(0, P{0.5, "h"});
  auto [d, s] = std::move(pb).finish(1);
  CHECK(d == Tensor::from_values<double>({0.5}));
  CHECK(s == std::vector<std::string>{"h"});
}

TEST_CASE("a field error names the field", "[core][batch_traits]") {
  using E = std::tuple<Tensor, Tensor>;
  batch_traits<E>::builder b(spec4);
  b.set(0, E{Tensor::scalar(1), Tensor::from_values<int>({1})});
  CHECK_THROWS_WITH(b.set(1, E{Tensor::scalar(1), Tensor::from_values<int>({1, 2})}),
                    Catch::StartsWith("InvalidArgument: field 1: batch:"));
}

namespace user {
struct Point {
  int x, y;
};
}  // namespace user

// A user specialisation: points batch into a struct of two tensors.
template <>
struct ingest::batch_traits<user::Point> {
  struct batch_type {
    Tensor xs, ys;
  };
  class builder {
   public:
    explicit builder(const BatchSpec& spec) : xs_(spec), ys_(spec) {}
    void set(std::size_t i, user::Point&& p) {
      xs_.set(i, p.x);
      ys_.set(i, p.y);
    }
    batch_type finish(std::size_t n) && {
      return {std::move(xs_).finish(n), std::move(ys_).finish(n)};
    }

   private:
    batch_traits<int>::builder xs_, ys_;
  };
};

TEST_CASE("users specialise batch_traits for their own types", "[core][batch_traits]") {
  batch_traits<user::Point>::builder b(spec4);
  b.set(0, {1, 2});
  b.set(1, {3, 4});
  auto batch = std::move(b).finish(2);
  CHECK(batch.xs == Tensor::from_values<int>({1, 3}));
  CHECK(batch.ys == Tensor::from_values<int>({2, 4}));
}

TEST_CASE("unbatch_traits split batches back", "[core][batch_traits]") {
  Tensor t = Tensor::from_values<int>({1, 2, 3, 4}, Shape{2, 2});
  CHECK(unbatch_traits<Tensor>::size(t) == 2);
  CHECK(unbatch_traits<Tensor>::get(t, 1) == Tensor::from_values<int>({3, 4}));
  Tensor scalar = Tensor::scalar(1);
  CHECK_THROWS_AS(unbatch_traits<Tensor>::size(scalar), InvalidArgument);

  std::tuple<Tensor, std::vector<std::string>> tb{Tensor::from_values<int>({5, 6}), {"a", "b"}};
  using U = unbatch_traits<decltype(tb)>;
  CHECK(U::size(tb) == 2);
  auto [x, s] = U::get(tb, 1);
  CHECK(x.item<int>() == 6);
  CHECK(s == "b");

  std::tuple<Tensor, std::vector<int>> uneven{Tensor::from_values<int>({5, 6}), {1}};
  CHECK_THROWS_AS(unbatch_traits<decltype(uneven)>::size(uneven), InvalidArgument);
}

TEST_CASE("builders refuse a batch too large to allocate (issue 10 item 4)", "[core][batch]") {
  const BatchSpec huge{std::size_t{1} << 40, &default_allocator()};
  // Scalars: the buffer is sized by the batch size; was std::bad_alloc.
  CHECK_THROWS_WITH(batch_traits<std::int64_t>::builder(huge),
                    Catch::Contains("batch_size 1099511627776 x 8-byte"));
  // Tensors: checked when the first element shows its size.
  batch_traits<Tensor>::builder b(huge);
  CHECK_THROWS_AS(b.set(0, Tensor::zeros(DType::float32, Shape{2})), InvalidArgument);
  batch_traits<Tensor>::builder empty(huge);
  empty.set(0, Tensor(DType::float32, Shape{0}));  // zero bytes fit any batch size
  CHECK(std::move(empty).finish(1).shape() == Shape{1, 0});
}
