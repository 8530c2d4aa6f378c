// Built against ingest::remote (the optional package component): registers
// the http, https and s3 schemes and checks SHA-256 through OpenSSL, so
// that OpenSSL is found and linked as a user's project would. No server is
// contacted.
#include <iostream>
#include <string>

#include <ingest/storage/remote.hpp>

int main() {
  const std::string empty_sha256 =
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  if (ingest::storage::sha256_hex("") != empty_sha256) return 1;
  if (!ingest::storage::scheme_for("s3://bucket/key", "consumer")) return 1;
  const ingest::storage::Url url = ingest::storage::parse_url("https://example.com/a?b=1");
  std::cout << "remote consumer: " << url.authority() << url.target << "\n";
  return url.port == 443 ? 0 : 1;
}
