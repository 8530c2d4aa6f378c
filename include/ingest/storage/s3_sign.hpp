// AWS Signature Version 4 for S3, header-based (the Authorization header):
// the canonical request, the string to sign, the signing key (an HMAC-SHA256
// chain over date, region, service and "aws4_request") and the signature,
// with SHA-256 and HMAC from OpenSSL 3. AWS counterpart: the SDKs' SigV4
// signer (aws-c-auth's aws_sign_request, botocore's S3SigV4Auth). Pure
// functions of their arguments (the clock is a parameter), so they are
// tested against AWS's published examples.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"

namespace ingest::storage {

/// An AWS access key; empty access_key_id means anonymous (requests are sent
/// unsigned).
struct AwsCredentials {
  /// The access key's id (empty: anonymous).
  std::string access_key_id{};
  /// The secret key the signing key derives from.
  std::string secret_access_key{};
  std::string session_token{};  ///< temporary credentials: sent as x-amz-security-token
  /// True if requests go unsigned.
  bool anonymous() const noexcept { return access_key_id.empty(); }
};

/// The x-amz-content-sha256 value of a payload that is not hashed.
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

namespace detail {
inline std::string hex(const unsigned char* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(2 * n, '\0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}
inline char lower_ascii(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
}  // namespace detail

/// SHA-256 of `data`, 32 raw bytes.
inline std::array<unsigned char, 32> sha256(std::string_view data) {
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != out.size()) {
    throw IoError("OpenSSL's SHA-256 failed");
  }
  return out;
}

/// SHA-256 of `data` as 64 lower-case hex digits (x-amz-content-sha256).
inline std::string sha256_hex(std::string_view data) {
  const auto digest = sha256(data);
  return detail::hex(digest.data(), digest.size());
}

/// HMAC-SHA256 of `data` under `key`, 32 raw bytes.
inline std::array<unsigned char, 32> hmac_sha256(std::string_view key, std::string_view data) {
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len) ||
      len != out.size()) {
    throw IoError("OpenSSL's HMAC-SHA256 failed");
  }
  return out;
}

/// S3's UriEncode: every byte but the unreserved A-Z a-z 0-9 '-' '.' '_' '~'
/// as %XX (upper-case hex); '/' is kept when `keep_slash` (object key paths).
inline std::string uri_encode(std::string_view s, bool keep_slash) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

/// Decodes %XX escapes (a malformed escape is kept as it is). '+' stays '+'.
inline std::string uri_decode(std::string_view s) {
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = value(s[i + 1]);
      const int lo = value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

/// The canonical URI of a request path (as sent, possibly %-encoded): each
/// segment decoded and encoded once again, '/' kept; "" becomes "/".
inline std::string canonical_uri(std::string_view path) {
  if (path.empty()) return "/";
  return uri_encode(uri_decode(path), /*keep_slash=*/true);
}

/// The canonical query string of a query (as sent, without '?'): each
/// name and value decoded and encoded again, "name=value" pairs sorted by
/// name then value and joined with '&'; a name without '=' gets an empty
/// value ("lifecycle" -> "lifecycle=").
inline std::string canonical_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    params.emplace_back(uri_encode(uri_decode(part.substr(0, eq)), false),
                        eq == std::string_view::npos
                            ? std::string{}
                            : uri_encode(uri_decode(part.substr(eq + 1)), false));
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

/// `t` as SigV4's ISO 8601 basic time, "20130524T000000Z" (UTC).
inline std::string amz_date(std::time_t t) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return std::string(buf, n);
}

/// One request to sign: what will be sent.
struct SigV4Request {
  /// The request method.
  std::string method{"GET"};
  std::string target{"/"};  ///< path[?query], %-encoded as sent
  /// The headers sent (Host included); names in any case. Hop-by-hop and
  /// transport headers (Content-Length, User-Agent, ...) are left unsigned.
  std::vector<std::pair<std::string, std::string>> headers{};
  /// Hex SHA-256 of the body (sha256_hex), or kUnsignedPayload.
  std::string payload_hash{};
};

/// The result of signing, every intermediate kept for tests and errors.
struct SigV4Signature {
  /// The canonical request (SigV4 task 1).
  std::string canonical_request{};
  /// The string to sign (SigV4 task 2).
  std::string string_to_sign{};
  std::string signed_headers{};  ///< "host;range;x-amz-content-sha256;x-amz-date"
  std::string signature{};       ///< 64 hex digits
  /// The headers to add to the request: x-amz-date, x-amz-content-sha256,
  /// x-amz-security-token (with a session token) and Authorization.
  std::vector<std::pair<std::string, std::string>> headers{};
};

/// The SigV4 signing key: HMAC chain "AWS4"+secret -> date -> region ->
/// service -> "aws4_request".
inline std::array<unsigned char, 32> sigv4_signing_key(std::string_view secret,
                                                       std::string_view date,
                                                       std::string_view region,
                                                       std::string_view service) {
  auto as_view = [](const std::array<unsigned char, 32>& a) {
    return std::string_view(reinterpret_cast<const char*>(a.data()), a.size());
  };
  const std::string first = "AWS4" + std::string(secret);
  const auto k_date = hmac_sha256(first, date);
  const auto k_region = hmac_sha256(as_view(k_date), region);
  const auto k_service = hmac_sha256(as_view(k_region), service);
  return hmac_sha256(as_view(k_service), "aws4_request");
}

/// Signs `request` with `credentials` at `date` (amz_date()'s format) for
/// `region` and `service`. Throws InvalidArgument for a malformed date or
/// anonymous credentials.
inline SigV4Signature sign_v4(const SigV4Request& request, const AwsCredentials& credentials,
                              std::string_view region, std::string_view date,
                              std::string_view service = "s3") {
  if (credentials.anonymous()) throw InvalidArgument("SigV4: no credentials to sign with");
  if (date.size() != 16 || date[8] != 'T' || date[15] != 'Z') {
    throw InvalidArgument("SigV4: the date '" + std::string(date) +
                          "' is not of the form 20130524T000000Z");
  }
  SigV4Signature out;
  out.headers.emplace_back("x-amz-date", std::string(date));
  out.headers.emplace_back("x-amz-content-sha256", request.payload_hash);
  if (!credentials.session_token.empty()) {
    out.headers.emplace_back("x-amz-security-token", credentials.session_token);
  }

  // Canonical headers: lower-cased names, values trimmed with inner runs of
  // spaces folded to one, repeated names joined with ',', sorted by name.
  std::vector<std::pair<std::string, std::string>> canon;
  auto add = [&canon](std::string_view name, std::string_view value) {
    std::string n;
    for (const char c : name) n.push_back(detail::lower_ascii(c));
    static constexpr std::string_view unsigned_names[] = {"authorization",
                                                          "connection",
                                                          "content-length",
                                                          "expect",
                                                          "keep-alive",
                                                          "proxy-connection",
                                                          "te",
                                                          "trailer",
                                                          "upgrade",
                                                          "user-agent",
                                                          "transfer-encoding",
                                                          "x-amzn-trace-id",
                                                          "accept-encoding"};
    for (const auto skip : unsigned_names) {
      if (n == skip) return;
    }
    std::string v;
    bool space = false;
    for (const char c : value) {
      const bool ws = c == ' ' || c == '\t';
      if (ws) {
        space = !v.empty();
        continue;
      }
      if (space) v.push_back(' ');
      space = false;
      v.push_back(c);
    }
    for (auto& [have, joined] : canon) {
      if (have == n) {
        joined += ',' + v;
        return;
      }
    }
    canon.emplace_back(std::move(n), std::move(v));
  };
  for (const auto& [name, value] : request.headers) {
    std::string lower;
    for (const char c : name) lower.push_back(detail::lower_ascii(c));
    // The request's own copies of the headers signing adds are replaced.
    if (lower == "x-amz-date" || lower == "x-amz-content-sha256" ||
        lower == "x-amz-security-token") {
      continue;
    }
    add(name, value);
  }
  for (const auto& [name, value] : out.headers) add(name, value);
  std::sort(canon.begin(), canon.end());

  std::string canonical_headers;
  for (const auto& [name, value] : canon) {
    canonical_headers += name + ':' + value + '\n';
    if (!out.signed_headers.empty()) out.signed_headers.push_back(';');
    out.signed_headers += name;
  }

  const std::string_view target = request.target;
  const auto q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query =
      q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  out.canonical_request = request.method + '\n' + canonical_uri(path) + '\n' +
                          canonical_query(query) + '\n' + canonical_headers + '\n' +
                          out.signed_headers + '\n' + request.payload_hash;

  const std::string_view day = date.substr(0, 8);
  const std::string scope =
      std::string(day) + '/' + std::string(region) + '/' + std::string(service) + "/aws4_request";
  out.string_to_sign = "AWS4-HMAC-SHA256\n" + std::string(date) + '\n' + scope + '\n' +
                       sha256_hex(out.canonical_request);
  const auto key = sigv4_signing_key(credentials.secret_access_key, day, region, service);
  const auto sig = hmac_sha256(
      std::string_view(reinterpret_cast<const char*>(key.data()), key.size()), out.string_to_sign);
  out.signature = detail::hex(sig.data(), sig.size());
  out.headers.emplace_back(
      "Authorization", "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + '/' + scope +
                           ",SignedHeaders=" + out.signed_headers + ",Signature=" + out.signature);
  return out;
}

}  // namespace ingest::storage
