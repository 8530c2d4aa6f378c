// Redaction of URLs in what ingest shows: errors (their message and file),
// log lines. A presigned URL carries its credentials in its query
// (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token), and a URL may
// carry a password before its host ("user:password@"): every log that
// records an error would keep them. So the one place that builds an error
// (core/errors.hpp) and the one that writes a log line (core/logging.hpp)
// pass their text through redact_urls(): the URL still names the object
// (scheme, host, path), its secret query values read REDACTED, and its user
// information is dropped. Thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ingest {

namespace detail {

inline char redact_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

/// The parameter names the user added (lower-case), beside the built-in ones.
struct RedactedNames {
  std::mutex mu;
  std::vector<std::string> names;
};
inline RedactedNames& redacted_names() {
  static auto* names = new RedactedNames;  // immortal: errors may be built during exit
  return *names;
}

/// `name` lower-cased and percent-decoded (a signer may encode "X-Amz-…" as
/// "X%2DAmz-…"), for matching.
inline std::string redact_key(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = redact_lower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size() && hex(name[i + 1]) >= 0 && hex(name[i + 2]) >= 0) {
      out.push_back(redact_lower(static_cast<char>(hex(name[i + 1]) * 16 + hex(name[i + 2]))));
      i += 2;
    } else {
      out.push_back(redact_lower(name[i]));
    }
  }
  return out;
}

/// True for a query parameter whose value is a secret: AWS's SigV4 and
/// SigV2 presigning (X-Amz-*, Signature, AWSAccessKeyId), Google's
/// (X-Goog-*), CloudFront's (Policy, Key-Pair-Id), Azure SAS (sig), OAuth
/// style tokens, and the names the user added.
inline bool secret_parameter(std::string_view raw_name) {
  const std::string name = redact_key(raw_name);
  if (name.rfind("x-amz-", 0) == 0 || name.rfind("x-goog-", 0) == 0) return true;
  static constexpr std::string_view builtin[] = {
      "signature", "awsaccesskeyid", "token", "access_token", "sig", "policy", "key-pair-id"};
  if (std::find(std::begin(builtin), std::end(builtin), name) != std::end(builtin)) return true;
  auto& user = redacted_names();
  std::lock_guard lock(user.mu);
  return std::find(user.names.begin(), user.names.end(), name) != user.names.end();
}

/// A character that ends a URL inside a message: space, a control
/// character, or the quotes and brackets messages put around one.
inline bool ends_url(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f || c == '\'' || c == '"' || c == '<' || c == '>' || c == '`' ||
         c == ')' || c == ']';
}

}  // namespace detail

/// Adds query parameter names (matched case-insensitively) whose values
/// redact_url() hides, beside the built-in ones (X-Amz-*, X-Goog-*,
/// Signature, AWSAccessKeyId, token, access_token, sig, Policy,
/// Key-Pair-Id). Names are never removed. Thread-safe.
inline void add_redacted_parameters(const std::vector<std::string>& names) {
  auto& user = detail::redacted_names();
  std::lock_guard lock(user.mu);
  for (const auto& raw : names) {
    std::string name = detail::redact_key(raw);
    if (!name.empty() && std::find(user.names.begin(), user.names.end(), name) == user.names.end())
      user.names.push_back(std::move(name));
  }
}

/// `url` as it may be shown: the user information before the host
/// ("user:password@") removed, and the value of every secret query
/// parameter replaced by "REDACTED"; scheme, host, port, path and the other
/// parameters as they were. Text that is not a URL ("scheme://…") is
/// returned unchanged.
inline std::string redact_url(std::string_view url) {
  const auto sep = url.find("://");
  if (sep == std::string_view::npos) return std::string(url);
  std::string out(url.substr(0, sep + 3));
  std::string_view rest = url.substr(sep + 3);
  const auto authority_end = std::min(rest.find_first_of("/?#"), rest.size());
  std::string_view authority = rest.substr(0, authority_end);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  out += authority;
  rest.remove_prefix(authority_end);
  const auto query = rest.find('?');
  if (query == std::string_view::npos) {
    out += rest;
    return out;
  }
  out += rest.substr(0, query + 1);
  rest.remove_prefix(query + 1);
  const auto fragment = std::min(rest.find('#'), rest.size());
  const std::string_view params = rest.substr(0, fragment);
  for (std::size_t pos = 0;;) {
    const auto amp = params.find('&', pos);
    const std::string_view param =
        params.substr(pos, amp == std::string_view::npos ? std::string_view::npos : amp - pos);
    const auto eq = param.find('=');
    if (eq != std::string_view::npos && detail::secret_parameter(param.substr(0, eq))) {
      out += param.substr(0, eq + 1);
      out += "REDACTED";
    } else {
      out += param;
    }
    if (amp == std::string_view::npos) break;
    out += '&';
    pos = amp + 1;
  }
  out += rest.substr(fragment);
  return out;
}

/// `text` with every URL in it ("scheme://…" up to a space, a quote, a
/// bracket or the end) passed through redact_url(). Cheap when the text
/// holds no "://" (most messages).
inline std::string redact_urls(std::string_view text) {
  auto sep = text.find("://");
  if (sep == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::size_t done = 0;
  while (sep != std::string_view::npos) {
    std::size_t start = sep;
    while (start > done) {
      const char c = text[start - 1];
      const bool scheme_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                               (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
      if (!scheme_char) break;
      --start;
    }
    std::size_t end = sep + 3;
    while (end < text.size() && !detail::ends_url(text[end])) ++end;
    out += text.substr(done, start - done);
    out += redact_url(text.substr(start, end - start));
    done = end;
    sep = text.find("://", done);
  }
  out += text.substr(done);
  return out;
}

}  // namespace ingest
