#include <catch2/catch.hpp>

#include <string>

#include <ingest/core/errors.hpp>
#include <ingest/core/logging.hpp>
#include <ingest/core/redact.hpp>

using namespace ingest;

TEST_CASE("redact_url hides signing parameters and user information", "[core][redact]") {
  CHECK(redact_url("https://h/o?X-Amz-Signature=abc&x=1") ==
        "https://h/o?X-Amz-Signature=REDACTED&x=1");
  CHECK(redact_url("https://user:pw@h:8443/a/b?token=t&Signature=s&AWSAccessKeyId=k") ==
        "https://h:8443/a/b?token=REDACTED&Signature=REDACTED&AWSAccessKeyId=REDACTED");
  CHECK(redact_url("http://h/o?x-amz-security-token=t#frag") ==
        "http://h/o?x-amz-security-token=REDACTED#frag");
  CHECK(redact_url("http://h/o?X%2DAmz%2DCredential=c&") ==
        "http://h/o?X%2DAmz%2DCredential=REDACTED&");
  CHECK(redact_url("http://h/a@b?flag&x=") == "http://h/a@b?flag&x=");  // '@' in a path stays
  CHECK(redact_url("/local/path?X-Amz-Signature=s") == "/local/path?X-Amz-Signature=s");
  CHECK(redact_url("s3://bucket/key") == "s3://bucket/key");
  add_redacted_parameters({"My-Secret"});
  CHECK(redact_url("http://h/?my-secret=1&other=2") == "http://h/?my-secret=REDACTED&other=2");
}

TEST_CASE("redact_urls finds every URL in a message", "[core][redact]") {
  CHECK(redact_urls("GET http://h/o?Signature=s failed (see https://u:p@h2/x?token=t)") ==
        "GET http://h/o?Signature=REDACTED failed (see https://h2/x?token=REDACTED)");
  CHECK(redact_urls("file 'http://h/o?sig=s', line 2") == "file 'http://h/o?sig=REDACTED', line 2");
  CHECK(redact_urls("no url here") == "no url here");
}

TEST_CASE("errors and log lines are redacted wherever they are built", "[core][redact]") {
  const IoError e("GET http://h/o?X-Amz-Signature=s failed", {.file = "http://u:pw@h/o?token=t"});
  CHECK(e.message() == "GET http://h/o?X-Amz-Signature=REDACTED failed");
  CHECK(e.context().file == "http://h/o?token=REDACTED");
  CHECK(std::string(e.what()).find("=s") == std::string::npos);
  IoError added("x");
  added.add_context({.file = "https://h/o?X-Amz-Credential=AKIA x"});  // a space: still one URL
  CHECK(added.context().file == "https://h/o?X-Amz-Credential=REDACTED");
  std::string logged;
  set_log_sink([&](std::string_view line) { logged = line; });
  log_line("cache: rebuilding 'http://h/c?X-Amz-Signature=s'");
  set_log_sink({});
  CHECK(logged == "cache: rebuilding 'http://h/c?X-Amz-Signature=REDACTED'");
}
