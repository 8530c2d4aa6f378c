#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/files.hpp"
#include "support/records.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;
using V = std::vector<std::int64_t>;

namespace {
auto repeated6 = [](std::int64_t x) { return from_vector(V(6, x)); };
const V tf_example{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3,
                   3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5};
}  // namespace

TEST_CASE("interleave follows tf.data's order exactly", "[stages][interleave][concurrency]") {
  // The example from tf.data's documentation.
  for (std::int64_t p : {1, 2, 4}) {
    INFO("parallelism " << p);
    auto ds =
        range(1, 6).interleave(repeated6, {.cycle_length = 2, .block_length = 4, .parallelism = p});
    CHECK(collect(ds) == tf_example);
  }
}

TEST_CASE("interleave shapes", "[stages][interleave][concurrency]") {
  auto upto = [](std::int64_t x) { return range(x); };  // x elements 0..x-1
  for (std::int64_t p : {1, 3}) {
    // cycle_length 1 is a flat map.
    CHECK(collect(range(4).interleave(upto, {.cycle_length = 1, .parallelism = p})) ==
          V{0, 0, 1, 0, 1, 2});
    // block_length 1 round robin, with elements of different lengths.
    CHECK(collect(range(1, 4).interleave(upto, {.cycle_length = 3, .parallelism = p})) ==
          V{0, 0, 0, 1, 1, 2});
    // A cycle larger than the input.
    CHECK(collect(range(1, 3).interleave(upto, {.cycle_length = 10, .parallelism = p})) ==
          V{0, 0, 1});
    // Empty inner datasets and an empty input.
    CHECK(collect(range(5).interleave([](std::int64_t) { return range(0); },
                                      {.cycle_length = 2, .parallelism = p}))
              .empty());
    CHECK(collect(range(0).interleave(upto, {.cycle_length = 2, .parallelism = p})).empty());
  }
  CHECK_THROWS_AS(range(3).interleave(upto, {.cycle_length = 0}), InvalidArgument);
  CHECK_THROWS_AS(range(3).interleave(upto, {.block_length = 0}), InvalidArgument);
  CHECK_THROWS_AS(range(3).interleave(upto, {.parallelism = -5}), InvalidArgument);
  CHECK(collect(range(3).interleave(upto)).size() == 3);  // autotuned cycle length
}

TEST_CASE("errors from f, from an open dataset and from the input surface and iteration continues",
          "[stages][interleave][concurrency]") {
  for (std::int64_t p : {1, 2}) {
    INFO("parallelism " << p);
    auto f = [](std::int64_t x) {
      if (x == 2) throw Boom("cannot open 2");
      return range(x * 10, x * 10 + 2).map([](std::int64_t v) -> std::int64_t {
        if (v == 31) throw Boom("bad 31");
        return v;
      });
    };
    auto out = collect_outcomes(range(5).interleave(f, {.cycle_length = 1, .parallelism = p}));
    std::vector<std::string> rendered;
    for (auto& o : out) rendered.push_back(o.value ? std::to_string(*o.value) : o.error);
    CHECK(rendered == std::vector<std::string>{
                          "0", "1", "10", "11",
                          "FunctionError: cannot open 2 [stage 'interleave', element 2]", "30",
                          "FunctionError: bad 31 [stage 'map', element 1]", "40", "41"});
  }
}

TEST_CASE("non-deterministic interleave yields every element once",
          "[stages][interleave][concurrency]") {
  auto f = [](std::int64_t x) {
    return range(x * 100, x * 100 + 50).map([](std::int64_t v) {
      if (v % 7 == 0) std::this_thread::sleep_for(50us);
      return v;
    });
  };
  auto got = collect(range(10).interleave(
      f, {.cycle_length = 4, .block_length = 3, .parallelism = 4, .deterministic = false}));
  std::sort(got.begin(), got.end());
  V want;
  for (std::int64_t x = 0; x < 10; ++x) {
    for (std::int64_t v = x * 100; v < x * 100 + 50; ++v) want.push_back(v);
  }
  CHECK(got == want);
}

TEST_CASE("parallel interleave fetches from several inputs at once",
          "[stages][interleave][concurrency]") {
  // Each inner dataset's first element waits until three fetchers are inside
  // at the same time (or 10 s pass): only concurrent fetching meets.
  std::atomic<int> inside{0};
  std::atomic<int> met{0};
  auto slow_file = [&](std::int64_t x) {
    return from_generator([&inside, &met, x] {
      return [&inside, &met, x, i = 0]() mutable -> std::optional<std::int64_t> {
        if (i == 2) return std::nullopt;
        if (i == 0) {
          inside.fetch_add(1);
          const auto deadline = std::chrono::steady_clock::now() + 10s;
          while (inside.load() < 3 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(100us);
          if (inside.load() >= 3) met.fetch_add(1);
        }
        return x * 10 + i++;
      };
    });
  };
  auto ds = range(3).interleave(slow_file, {.cycle_length = 3, .parallelism = 3});
  CHECK(collect(ds) == V{0, 10, 20, 1, 11, 21});
  CHECK(met.load() == 3);
}

TEST_CASE("destroying a parallel interleave mid-stream stops its fetchers",
          "[stages][interleave][concurrency]") {
  std::atomic<int> pulled{0};
  auto f = [&pulled](std::int64_t x) {
    return range(x * 1000, x * 1000 + 1000).map([&pulled](std::int64_t v) {
      pulled.fetch_add(1);
      std::this_thread::sleep_for(200us);
      return v;
    });
  };
  {
    auto it = range(100).interleave(f, {.cycle_length = 4, .parallelism = 4}).iterator();
    CHECK(it.next() == 0);
  }
  const int after = pulled.load();
  std::this_thread::sleep_for(20ms);
  CHECK(pulled.load() == after);
}

TEST_CASE("parallel interleave of large mapped TFRecord files, pages populated on the pool",
          "[stages][interleave][concurrency]") {
  // W3's shape: readers on pool threads whose mapped files get background
  // population jobs on the same pool, some iterators stopped mid-file.
  TempDir dir;
  std::vector<std::string> paths;
  std::vector<std::vector<std::string>> payloads;
  for (int f = 0; f < 3; ++f) {
    std::vector<std::string> records;
    for (int i = 0; i < 1200; ++i)
      records.push_back(std::string(4000 + i, static_cast<char>('a' + f)));
    write_file(dir / std::to_string(f), frame_records(records));
    paths.push_back(dir / std::to_string(f));
    payloads.push_back(std::move(records));
  }
  const auto files = from_vector(paths);
  for (std::size_t threads : {1, 2}) {
    INFO("threads " << threads);
    auto ds = files
                  .interleave([](const std::string& p) { return tfrecord(p); },
                              {.cycle_length = 3, .parallelism = 3})
                  .with_options({.threads = threads});
    std::vector<std::string> got = collect(ds);
    REQUIRE(got.size() == 3 * 1200);
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == payloads[i % 3][i / 3]);
    auto it = ds.iterator();
    for (int i = 0; i < 500; ++i) REQUIRE(it.next());
  }
}

TEST_CASE("parallel interleave threads are bounded by parallelism, not cycle_length",
          "[stages][interleave][concurrency]") {
  // 600 inputs of 3 elements each, 500 open at once, 2 pulling at once.
  auto f = [](std::int64_t x) { return range(x * 10, x * 10 + 3); };
  const std::int64_t n = 600, cycle = 500;
  // tf.data's order: the first 500 inputs round robin, each replaced (at its
  // end) by the next input, whose elements then take that slot's turns.
  V want = collect(range(n).interleave(f, {.cycle_length = cycle, .parallelism = 1}));
  REQUIRE(want.size() == 3 * n);
  CHECK(want[499] == 4990);   // the first round: each input's first element
  CHECK(want[500] == 1);      // the second round
  CHECK(want[1500] == 5000);  // input 500 took slot 0 after its end
  // A runtime of its own, whose driver threads (created on demand, kept)
  // count the most producers that ever ran at once.
  auto det = std::make_shared<Runtime>(2);
  auto got = collect(range(n)
                         .interleave(f, {.cycle_length = cycle, .parallelism = 2})
                         .with_options({.runtime = det}));
  CHECK(got == want);
  CHECK(det->driver_threads() <= 8);

  auto any = std::make_shared<Runtime>(2);
  auto unordered =
      collect(range(n)
                  .interleave(f, {.cycle_length = cycle, .parallelism = 2, .deterministic = false})
                  .with_options({.runtime = any}));
  std::sort(unordered.begin(), unordered.end());
  std::sort(want.begin(), want.end());
  CHECK(unordered == want);
  CHECK(any->driver_threads() <= 8);
}

TEST_CASE("a huge cycle_length allocates only what the input opens",
          "[stages][interleave][concurrency]") {
  auto f = [](std::int64_t x) { return range(x * 10, x * 10 + 2); };
  for (bool deterministic : {true, false}) {
    for (std::int64_t p : {1, 2}) {
      INFO("parallelism " << p << " deterministic " << deterministic);
      auto ds = range(3).interleave(f, {.cycle_length = std::int64_t{1} << 40,
                                        .parallelism = p,
                                        .deterministic = deterministic});
      V got = collect(ds);
      if (deterministic) {
        CHECK(got == V{0, 10, 20, 1, 11, 21});
      } else {
        std::sort(got.begin(), got.end());
        CHECK(got == V{0, 1, 10, 11, 20, 21});
      }
    }
  }
}

TEST_CASE("input errors surface at their position, whatever the parallelism",
          "[stages][interleave][concurrency]") {
  // tf.data's interleave kernel tests with an input that raises: the error
  // takes the turn of the input element it replaces, and iteration goes on.
  auto input = range(5).map([](std::int64_t x) -> std::int64_t {
    if (x == 1 || x == 3) throw Boom("bad input " + std::to_string(x));
    return x;
  });
  auto f = [](std::int64_t x) { return range(x * 10, x * 10 + 2); };
  const std::string e1 = "FunctionError: bad input 1 [stage 'map', element 1]";
  const std::string e3 = "FunctionError: bad input 3 [stage 'map', element 3]";
  auto render = [](const auto& ds) {
    std::vector<std::string> out;
    for (auto& o : collect_outcomes(ds))
      out.push_back(o.value ? std::to_string(*o.value) : o.error);
    return out;
  };
  for (std::int64_t p : {1, 2, 4}) {
    INFO("parallelism " << p);
    CHECK(render(input.interleave(f, {.cycle_length = 1, .parallelism = p})) ==
          std::vector<std::string>{"0", "1", e1, "20", "21", e3, "40", "41"});
    CHECK(render(input.interleave(f, {.cycle_length = 2, .parallelism = p})) ==
          std::vector<std::string>{"0", e1, "20", "1", "21", e3, "40", "41"});
    CHECK(render(input.interleave(f, {.cycle_length = 3, .block_length = 2, .parallelism = p})) ==
          std::vector<std::string>{"0", "1", e1, "20", "21", e3, "40", "41"});
  }
}

TEST_CASE("destroying a parallel interleave stops the batches its inputs are filling",
          "[stages][interleave][concurrency]") {
  // Each input: range(1000) -> map(2 ms per call) -> batch(100). Without
  // cancellation every running producer finishes its 100-element batch.
  std::atomic<int> calls{0};
  auto f = [&calls](std::int64_t) {
    return range(1000)
        .map([&calls](std::int64_t v) {
          calls.fetch_add(1);
          std::this_thread::sleep_for(2ms);
          return v;
        })
        .batch(100);
  };
  for (std::int64_t p : {1, 2}) {
    INFO("parallelism " << p);
    auto it = range(8)
                  .interleave(f, {.cycle_length = 4, .parallelism = p})
                  .with_options({.threads = 2})
                  .iterator();
    REQUIRE(it.next().has_value());
    std::this_thread::sleep_for(10ms);  // the producers are inside their next batches
    int before = 0;
    {
      auto doomed = std::move(it);
      before = calls.load();
    }
    // The element in hand of each pulling producer, and one per check's race.
    CHECK(calls.load() - before <= 2 * static_cast<int>(p) + 2);
  }
}

TEST_CASE("a tuned parallelism of 1 pulls the open inputs inline, and more brings producers back",
          "[stages][interleave][concurrency]") {
  // Which thread produced each element: the consumer's, or a producer's.
  constexpr std::int64_t shard_size = 5000;
  std::vector<std::thread::id> producer(4 * shard_size);
  const auto shard = [&](std::int64_t s) {
    return range(s * shard_size, (s + 1) * shard_size).map([&](std::int64_t x) {
      producer[static_cast<std::size_t>(x)] = std::this_thread::get_id();  // one writer per x
      return x;
    });
  };
  using It = InterleaveIterator<detail::child_iterator_t<RangeDataset>, decltype(shard)>;
  std::atomic<std::int64_t> knob{3};
  IteratorContext ctx;
  const It::Config config{.cycle_length = 2,
                          .block_length = 1,
                          .parallelism = 3,
                          .deterministic = true,
                          .tuned_parallelism = &knob};
  It it(detail::child_iterator(range(4), ctx), shard, config, ctx);
  V got;
  // The first call opens shard 0 and two ahead (1, 2), each with a producer.
  got.push_back(*it.next());
  knob = 1;  // the autotuner's choice: shards 0 and 1 go on inline, after what was produced
  while (got.size() < 2 * 4000) got.push_back(*it.next());
  knob = 3;  // and back: they get producers again; shards 2 and 3 keep theirs
  while (auto x = it.next()) got.push_back(*x);
  CHECK(got == collect(range(4).interleave(
                   [](std::int64_t s) { return range(s * shard_size, (s + 1) * shard_size); },
                   {.cycle_length = 2})));
  const auto me = std::this_thread::get_id();
  const auto by_producer = [&](std::int64_t x) {
    return producer[static_cast<std::size_t>(x)] != me;
  };
  CHECK(by_producer(0));
  for (std::int64_t s : {0, 1}) {
    INFO("shard " << s);
    CHECK_FALSE(by_producer(s * shard_size + 3000));  // inline while the knob was 1
    CHECK(by_producer(s * shard_size + shard_size - 1));
  }
  for (std::int64_t s : {2, 3}) {
    INFO("shard " << s);
    CHECK(by_producer(s * shard_size + 4000));
  }
}
