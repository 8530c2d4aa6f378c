// Runtime::post: Runtime (runtime/runtime_core.hpp) with its compute pool,
// Boost.Asio's thread_pool. Include this header to post work to a runtime;
// those that only size, spawn on or pass runtimes include runtime_core.hpp
// and stay clear of Boost.Asio.
#pragma once

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <cstddef>
#include <utility>

#include "ingest/runtime/runtime_core.hpp"

namespace ingest {

namespace detail {

/// The compute pool: a Boost.Asio thread_pool of the runtime's threads.
class AsioComputePool final : public ComputePool {
 public:
  explicit AsioComputePool(std::size_t threads) : pool(threads) {}
  ~AsioComputePool() override { pool.join(); }

  boost::asio::thread_pool pool;
};

}  // namespace detail

template <class F>
void Runtime::post(F&& f) {
  boost::asio::post(pool<detail::AsioComputePool>().pool, std::forward<F>(f));
}

}  // namespace ingest
