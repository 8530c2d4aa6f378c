// libFuzzer target: HTTP/1.1 responses as the client reads them: Beast's
// response parser with the client's limits (HttpOptions' header limit, a
// body limit, a read buffer of the header limit plus one read, chunk
// extensions counted against the header limit), fed in pieces whose size
// the first byte picks, as reads from a socket arrive; then what the client
// does with a parsed response (Content-Range, Retry-After, the excerpt of
// an error body, the status text). Any input must end in a response or an
// error code: never a crash, a hang or memory beyond the limits.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <ingest/storage/http_client.hpp>
#include <ingest/storage/http_file.hpp>

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = std::size_t{1} << (data[0] & 0x0f);  // 1 B .. 32 KiB reads
  const bool head = (data[0] & 0x10) != 0;
  const std::size_t header_limit = 4096, body_limit = 1 << 16;
  ++data;
  --size;
  http::response_parser<http::string_body> parser;
  parser.header_limit(header_limit);
  parser.body_limit(body_limit);
  if (head) parser.skip(true);
  std::size_t framing = 0;
  std::function<void(std::uint64_t, boost::beast::string_view, boost::system::error_code&)>
      on_chunk = [&](std::uint64_t, boost::beast::string_view ext, boost::system::error_code& ec) {
        framing += ext.size() + 16;
        if (framing > header_limit) ec = http::error::header_limit;
      };
  parser.on_chunk_header(on_chunk);
  boost::beast::flat_buffer buffer(header_limit + piece);
  boost::system::error_code ec;
  std::size_t at = 0;
  while (!parser.is_done()) {
    const std::size_t room = buffer.max_size() - buffer.size();
    if (room == 0) break;  // buffer_overflow: the client's limit error
    if (at == size) {
      parser.put_eof(ec);
      break;
    }
    const std::size_t n = std::min({piece, room, size - at});
    auto dst = buffer.prepare(n);
    std::memcpy(dst.data(), data + at, n);
    buffer.commit(n);
    at += n;
    for (;;) {
      const std::size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec || parser.is_done() || used == 0) break;
    }
    if (ec) break;
  }
  if (!ec && parser.is_header_done()) {
    const auto& msg = parser.get();
    ingest::storage::HttpResponse response;
    response.status = static_cast<int>(msg.result_int());
    for (const auto& field : msg) {
      response.headers.push_back({std::string(field.name_string()), std::string(field.value())});
    }
    response.body = msg.body();
    if (const auto* range = response.header("Content-Range")) {
      (void)ingest::storage::detail::parse_content_range(*range);
    }
    if (const auto* retry = response.header("Retry-After")) {
      (void)ingest::storage::detail::parse_retry_after(*retry, std::chrono::system_clock::now());
    }
    (void)ingest::storage::detail::body_excerpt(response.body);
    (void)ingest::storage::detail::status_text(response.status);
  }
  return 0;
}
