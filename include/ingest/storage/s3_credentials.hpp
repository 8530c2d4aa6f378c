// Where S3 requests get their credentials, region and endpoint, in the order
// the AWS CLI and SDKs look: the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then the shared credentials
// file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials) with the profile
// AWS_PROFILE or "default", then anonymous. AWS counterpart: the SDKs'
// default credential provider chain (environment and profile providers only:
// no instance metadata, SSO or assume-role).
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/storage/s3_sign.hpp"

namespace ingest::storage {

namespace detail {
inline std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string{};
}
inline std::string_view trim_ascii(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}
}  // namespace detail

/// The sections of an INI file (the AWS shared credentials and config
/// files): section name -> key -> value. Lines starting with '#' or ';' are
/// comments; names and values are trimmed; "[profile x]" is section "x";
/// keys are lower-cased. A key outside any section, or a line that is
/// neither a section, a key = value pair nor a comment, throws
/// InvalidArgument naming `path` and the line.
inline std::map<std::string, std::map<std::string, std::string>> parse_ini(
    std::string_view text, const std::string& path) {
  std::map<std::string, std::map<std::string, std::string>> sections;
  std::map<std::string, std::string>* current = nullptr;
  std::int64_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const std::string_view line = detail::trim_ascii(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        throw InvalidArgument("malformed section header in the AWS credentials file",
                              {.file = path, .line = line_no});
      }
      std::string_view name = detail::trim_ascii(line.substr(1, line.size() - 2));
      if (name.substr(0, 8) == "profile " || name.substr(0, 8) == "profile\t") {
        name = detail::trim_ascii(name.substr(8));
      }
      current = &sections[std::string(name)];
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string_view::npos || current == nullptr) {
      throw InvalidArgument(
          current == nullptr ? "a setting before any [profile] section in the AWS credentials file"
                             : "a line that is not 'name = value' in the AWS credentials file",
          {.file = path, .line = line_no});
    }
    std::string key;
    for (const char c : detail::trim_ascii(line.substr(0, eq)))
      key.push_back(detail::lower_ascii(c));
    (*current)[key] = std::string(detail::trim_ascii(line.substr(eq + 1)));
  }
  return sections;
}

/// The credentials in the environment (AWS_ACCESS_KEY_ID,
/// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), if the key id is set.
/// InvalidArgument if only one of the key id and the secret is set.
inline std::optional<AwsCredentials> credentials_from_env() {
  AwsCredentials c{.access_key_id = detail::getenv_string("AWS_ACCESS_KEY_ID"),
                   .secret_access_key = detail::getenv_string("AWS_SECRET_ACCESS_KEY"),
                   .session_token = detail::getenv_string("AWS_SESSION_TOKEN")};
  if (c.access_key_id.empty() && c.secret_access_key.empty()) return std::nullopt;
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    throw InvalidArgument(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (only one is)");
  }
  return c;
}

/// The path of the shared credentials file: AWS_SHARED_CREDENTIALS_FILE,
/// else $HOME/.aws/credentials (empty if neither is known).
inline std::string shared_credentials_path() {
  std::string path = detail::getenv_string("AWS_SHARED_CREDENTIALS_FILE");
  if (!path.empty()) return path;
  const std::string home = detail::getenv_string("HOME");
  return home.empty() ? std::string{} : home + "/.aws/credentials";
}

/// The credentials of `profile` in the shared credentials file `path`;
/// nullopt if the file or the profile does not exist. InvalidArgument if the
/// profile lacks aws_access_key_id or aws_secret_access_key.
inline std::optional<AwsCredentials> credentials_from_file(const std::string& path,
                                                           const std::string& profile) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  constexpr std::size_t kMaxBytes = 1 << 20;  // a credentials file is small
  std::string text;
  text.resize(kMaxBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxBytes) {
    throw InvalidArgument("the AWS credentials file is larger than 1 MiB", {.file = path});
  }
  const auto sections = parse_ini(text, path);
  const auto it = sections.find(profile);
  if (it == sections.end()) return std::nullopt;
  auto get = [&](const char* key) {
    const auto kv = it->second.find(key);
    return kv == it->second.end() ? std::string{} : kv->second;
  };
  AwsCredentials c{.access_key_id = get("aws_access_key_id"),
                   .secret_access_key = get("aws_secret_access_key"),
                   .session_token = get("aws_session_token")};
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    throw InvalidArgument(
        "the profile '" + profile + "' lacks aws_access_key_id or aws_secret_access_key",
        {.file = path});
  }
  return c;
}

/// The credentials to sign with: the environment, else the shared
/// credentials file's profile (`profile`, else AWS_PROFILE, else
/// "default"), else anonymous. A profile named explicitly (argument or
/// AWS_PROFILE) that the file lacks throws InvalidArgument naming the file.
inline AwsCredentials resolve_credentials(std::string_view profile = {}) {
  if (auto env = credentials_from_env()) return *env;
  std::string name(profile);
  if (name.empty()) name = detail::getenv_string("AWS_PROFILE");
  const bool named = !name.empty();
  if (!named) name = "default";
  const std::string path = shared_credentials_path();
  if (!path.empty()) {
    if (auto file = credentials_from_file(path, name)) return *file;
  }
  if (named) {
    throw InvalidArgument("the AWS profile '" + name + "' is not in the shared credentials file",
                          {.file = path});
  }
  return {};
}

/// The region: `option`, else AWS_REGION, else AWS_DEFAULT_REGION, else
/// "us-east-1".
inline std::string resolve_region(std::string_view option = {}) {
  if (!option.empty()) return std::string(option);
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string v = detail::getenv_string(name);
    if (!v.empty()) return v;
  }
  return "us-east-1";
}

/// The S3 endpoint URL: `option`, else AWS_ENDPOINT_URL_S3, else
/// AWS_ENDPOINT_URL, else "https://s3.<region>.amazonaws.com". Any trailing
/// '/' is dropped.
inline std::string resolve_endpoint(std::string_view option, std::string_view region) {
  std::string endpoint(option);
  if (endpoint.empty()) endpoint = detail::getenv_string("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = detail::getenv_string("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = "https://s3." + std::string(region) + ".amazonaws.com";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

}  // namespace ingest::storage
