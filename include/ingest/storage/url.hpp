// URLs of the http:// and https:// storage scheme (and of the endpoints the
// s3:// scheme talks to): parse_url splits "https://host:8443/a/b?x=1" into
// scheme, host, port and request target, with the scheme's default port
// filled in. Part of the remote storage part (CMake target ingest::remote).
// tf.data counterpart: the URL parsing of TensorFlow's HTTP file system
// (tensorflow/core/platform/cloud/curl_http_request.cc leaves it to curl).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"

namespace ingest::storage {

/// An absolute http:// or https:// URL, split into what a request needs.
struct Url {
  std::string scheme{};     ///< "http" or "https" (lower-case)
  std::string host{};       ///< host name or IP literal (IPv6 without brackets)
  std::uint16_t port{};     ///< explicit port, else the scheme's default (80 / 443)
  std::string target{"/"};  ///< path and query as given (already percent-encoded), "/" when empty

  /// The scheme's default port (80 for http, 443 for https).
  std::uint16_t default_port() const noexcept { return scheme == "https" ? 443 : 80; }

  /// host[:port], the port omitted when it is the default; IPv6 literals in
  /// brackets. This is the Host header of a request to the URL.
  std::string authority() const {
    std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (port != default_port()) out += ":" + std::to_string(port);
    return out;
  }

  /// The URL again: scheme://authority + target.
  std::string str() const { return scheme + "://" + authority() + target; }
};

/// Splits an absolute http:// or https:// URL. The scheme is matched
/// case-insensitively; user information ("user@") and fragments are
/// rejected, as are ports outside 1..65535 and control characters or spaces.
/// Throws InvalidArgument naming the URL when it is malformed.
inline Url parse_url(std::string_view url) {
  auto fail = [&](std::string_view why) -> InvalidArgument {
    return InvalidArgument("malformed URL: " + std::string(why), {.file = std::string(url)});
  };
  for (const char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) throw fail("it contains a space or a control character");
  }
  Url out;
  const auto sep = url.find("://");
  if (sep == std::string_view::npos) throw fail("no scheme (expected http:// or https://)");
  for (const char c : url.substr(0, sep)) {
    out.scheme.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  if (out.scheme != "http" && out.scheme != "https") {
    throw fail("the scheme is not http:// or https://");
  }
  std::string_view rest = url.substr(sep + 3);
  const auto path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view target =
      path_start == std::string_view::npos ? std::string_view{} : rest.substr(path_start);
  if (target.find('#') != std::string_view::npos) throw fail("it has a fragment ('#')");
  if (authority.find('@') != std::string_view::npos) {
    throw fail("user information ('user@host') is not supported");
  }
  if (authority.empty()) throw fail("no host");

  std::string_view port_text;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw fail("an IPv6 literal without ']'");
    out.host = std::string(authority.substr(1, close - 1));
    if (out.host.empty() ||
        out.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      throw fail("a malformed IPv6 literal");
    }
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw fail("text after the IPv6 literal");
      port_text = after.substr(1);
      if (port_text.empty()) throw fail("an empty port");
    }
  } else {
    const auto colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) throw fail("an empty port");
    }
    if (out.host.empty()) throw fail("no host");
    for (const char c : out.host) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '%';
      if (!ok) throw fail("a character not allowed in a host name");
    }
  }
  if (!port_text.empty()) {
    std::uint32_t port = 0;
    for (const char c : port_text) {
      if (c < '0' || c > '9') throw fail("a port that is not a number");
      port = port * 10 + static_cast<std::uint32_t>(c - '0');
      if (port > 65535) throw fail("a port above 65535");
    }
    if (port == 0) throw fail("port 0");
    out.port = static_cast<std::uint16_t>(port);
  } else {
    out.port = out.default_port();
  }
  if (target.empty()) {
    out.target = "/";
  } else if (target.front() == '?') {
    out.target = "/" + std::string(target);
  } else {
    out.target = std::string(target);
  }
  return out;
}

}  // namespace ingest::storage
