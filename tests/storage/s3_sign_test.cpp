// The pure parts of the S3 scheme: SigV4 against AWS's published examples,
// S3's URI encoding, credentials from the environment and the shared
// credentials file, and the XML of ListObjectsV2 and error bodies.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>

#include <ingest/storage/s3_credentials.hpp>
#include <ingest/storage/s3_sign.hpp>
#include <ingest/storage/s3_xml.hpp>

#include "support/files.hpp"

using namespace ingest;
using namespace ingest::storage;
using ingest::testing::TempDir;
using ingest::testing::write_file;

namespace {

// AWS's example key (the S3 API reference, "Signature Calculations for the
// Authorization Header: Transferring Payload in a Single Chunk").
const AwsCredentials kExampleKey{.access_key_id = "AKIAIOSFODNN7EXAMPLE",
                                 .secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
constexpr const char* kExampleDate = "20130524T000000Z";
constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnvVar {
 public:
  ScopedEnvVar(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ScopedEnvVar(const ScopedEnvVar&) = delete;
  ScopedEnvVar& operator=(const ScopedEnvVar&) = delete;
  ~ScopedEnvVar() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_{};
};

// No AWS variables from the machine running the tests.
struct CleanAwsEnv {
  ScopedEnvVar a{"AWS_ACCESS_KEY_ID", std::nullopt};
  ScopedEnvVar b{"AWS_SECRET_ACCESS_KEY", std::nullopt};
  ScopedEnvVar c{"AWS_SESSION_TOKEN", std::nullopt};
  ScopedEnvVar d{"AWS_PROFILE", std::nullopt};
  ScopedEnvVar e{"AWS_SHARED_CREDENTIALS_FILE", std::nullopt};
  ScopedEnvVar f{"AWS_REGION", std::nullopt};
  ScopedEnvVar g{"AWS_DEFAULT_REGION", std::nullopt};
  ScopedEnvVar h{"AWS_ENDPOINT_URL", std::nullopt};
  ScopedEnvVar i{"AWS_ENDPOINT_URL_S3", std::nullopt};
};

}  // namespace

TEST_CASE("SigV4 GET Object with a Range matches AWS's example", "[s3]") {
  SigV4Request r{.method = "GET",
                 .target = "/test.txt",
                 .headers = {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}},
                 .payload_hash = kEmptySha256};
  const auto s = sign_v4(r, kExampleKey, "us-east-1", kExampleDate);
  CHECK(s.canonical_request ==
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(s.string_to_sign ==
        "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  CHECK(s.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  REQUIRE(s.headers.size() == 3);
  CHECK(s.headers[2].first == "Authorization");
  CHECK(s.headers[2].second ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("SigV4 PUT Object matches AWS's example", "[s3]") {
  const std::string body = "Welcome to Amazon S3.";
  CHECK(sha256_hex(body) == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SigV4Request r{.method = "PUT",
                 .target = "/test$file.text",
                 .headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                             {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                             {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                             {"Content-Length", "21"}},
                 .payload_hash = sha256_hex(body)};
  const auto s = sign_v4(r, kExampleKey, "us-east-1", kExampleDate);
  CHECK(s.canonical_request.substr(0, 22) == "PUT\n/test%24file.text\n");
  CHECK(s.signed_headers == "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  CHECK(s.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
  // Sent already encoded, the path signs the same.
  r.target = "/test%24file.text";
  CHECK(sign_v4(r, kExampleKey, "us-east-1", kExampleDate).signature == s.signature);
}

TEST_CASE("SigV4 GET Bucket Lifecycle matches AWS's example", "[s3]") {
  SigV4Request r{.method = "GET",
                 .target = "/?lifecycle",
                 .headers = {{"Host", "examplebucket.s3.amazonaws.com"}},
                 .payload_hash = kEmptySha256};
  const auto s = sign_v4(r, kExampleKey, "us-east-1", kExampleDate);
  CHECK(s.canonical_request.substr(0, 17) == "GET\n/\nlifecycle=\n");
  CHECK(s.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST_CASE("SigV4 GET Bucket list objects matches AWS's example", "[s3]") {
  SigV4Request r{.method = "GET",
                 .target = "/?prefix=J&max-keys=2",  // sorted when signed
                 .headers = {{"host", "examplebucket.s3.amazonaws.com"}},
                 .payload_hash = kEmptySha256};
  const auto s = sign_v4(r, kExampleKey, "us-east-1", kExampleDate);
  CHECK(s.canonical_request.substr(0, 26) == "GET\n/\nmax-keys=2&prefix=J\n");
  CHECK(s.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST_CASE("SigV4 with a session token signs x-amz-security-token", "[s3]") {
  AwsCredentials c = kExampleKey;
  c.session_token = "token/with+chars";
  SigV4Request r{.target = "/k",
                 .headers = {{"Host", "h"}, {"User-Agent", "x"}},
                 .payload_hash = std::string(kUnsignedPayload)};
  const auto s = sign_v4(r, c, "eu-west-1", kExampleDate);
  CHECK(s.signed_headers == "host;x-amz-content-sha256;x-amz-date;x-amz-security-token");
  CHECK(s.canonical_request.find("x-amz-security-token:token/with+chars\n") != std::string::npos);
  CHECK(s.canonical_request.substr(s.canonical_request.size() - 16) == "UNSIGNED-PAYLOAD");
  CHECK(s.headers.size() == 4);
  CHECK(s.string_to_sign.find("20130524/eu-west-1/s3/aws4_request") != std::string::npos);
  CHECK(sign_v4(r, kExampleKey, "eu-west-1", kExampleDate).signature != s.signature);
}

TEST_CASE("SigV4 canonical headers trim values and fold spaces", "[s3]") {
  SigV4Request r{.target = "/",
                 .headers = {{"Host", "h"}, {"X-Amz-Meta-A", "  a   b  "}, {"x-amz-meta-a", "c"}},
                 .payload_hash = kEmptySha256};
  const auto s = sign_v4(r, kExampleKey, "us-east-1", kExampleDate);
  CHECK(s.canonical_request.find("\nx-amz-meta-a:a b,c\n") != std::string::npos);
  CHECK_THROWS_AS(sign_v4(r, AwsCredentials{}, "us-east-1", kExampleDate), InvalidArgument);
  CHECK_THROWS_AS(sign_v4(r, kExampleKey, "us-east-1", "2013-05-24"), InvalidArgument);
}

TEST_CASE("S3 URI encoding keeps unreserved bytes and slashes in paths", "[s3]") {
  CHECK(uri_encode("a-b_c.d~e/f g+h=i&j%k", true) == "a-b_c.d~e/f%20g%2Bh%3Di%26j%25k");
  CHECK(uri_encode("a/b", false) == "a%2Fb");
  CHECK(uri_encode("\xc3\xa9", false) == "%C3%A9");
  CHECK(uri_decode("a%2Fb%zz%4") == "a/b%zz%4");
  CHECK(canonical_uri("") == "/");
  CHECK(canonical_uri("/bucket/dir/file name.txt") == "/bucket/dir/file%20name.txt");
  CHECK(canonical_uri("/bucket/a%2bb") == "/bucket/a%2Bb");
  CHECK(canonical_query("") == "");
  CHECK(canonical_query("b=2&a=1&a=0&uploads") == "a=0&a=1&b=2&uploads=");
  CHECK(canonical_query("prefix=a b/c&list-type=2") == "list-type=2&prefix=a%20b%2Fc");
  CHECK(amz_date(0) == "19700101T000000Z");
  CHECK(amz_date(1369353600) == kExampleDate);
}

TEST_CASE("S3 credentials come from the environment first", "[s3]") {
  CleanAwsEnv clean;
  CHECK(resolve_credentials().anonymous());
  {
    ScopedEnvVar id("AWS_ACCESS_KEY_ID", "AKID");
    CHECK_THROWS_AS(resolve_credentials(), InvalidArgument);  // no secret
    ScopedEnvVar secret("AWS_SECRET_ACCESS_KEY", "SECRET");
    ScopedEnvVar token("AWS_SESSION_TOKEN", "TOKEN");
    const auto c = resolve_credentials();
    CHECK(c.access_key_id == "AKID");
    CHECK(c.secret_access_key == "SECRET");
    CHECK(c.session_token == "TOKEN");
  }
  CHECK(resolve_region() == "us-east-1");
  CHECK(resolve_region("ap-south-1") == "ap-south-1");
  {
    ScopedEnvVar r2("AWS_DEFAULT_REGION", "eu-west-2");
    CHECK(resolve_region() == "eu-west-2");
    ScopedEnvVar r1("AWS_REGION", "eu-west-1");
    CHECK(resolve_region() == "eu-west-1");
  }
  CHECK(resolve_endpoint("", "us-west-2") == "https://s3.us-west-2.amazonaws.com");
  CHECK(resolve_endpoint("http://127.0.0.1:9000/", "x") == "http://127.0.0.1:9000");
  ScopedEnvVar e1("AWS_ENDPOINT_URL", "http://generic:1");
  CHECK(resolve_endpoint("", "x") == "http://generic:1");
  ScopedEnvVar e2("AWS_ENDPOINT_URL_S3", "http://s3only:2");
  CHECK(resolve_endpoint("", "x") == "http://s3only:2");
}

TEST_CASE("S3 credentials come from the shared credentials file and profile", "[s3]") {
  CleanAwsEnv clean;
  TempDir home;
  ScopedEnvVar home_env("HOME", home.path().string());
  CHECK(resolve_credentials().anonymous());  // no ~/.aws/credentials
  std::filesystem::create_directories(home.path() / ".aws");
  write_file(home / ".aws/credentials",
             "# a comment\n"
             "[default]\n"
             "aws_access_key_id = DEFAULTKEY\n"
             "  aws_secret_access_key=default/secret  \r\n"
             "; another comment\n"
             "\n"
             "[profile work]\n"
             "AWS_ACCESS_KEY_ID\t=\tWORKKEY\n"
             "aws_secret_access_key = work+secret=\n"
             "aws_session_token = worktoken\n"
             "[incomplete]\n"
             "aws_access_key_id = ONLYID\n");
  auto c = resolve_credentials();
  CHECK(c.access_key_id == "DEFAULTKEY");
  CHECK(c.secret_access_key == "default/secret");
  CHECK(c.session_token.empty());
  c = resolve_credentials("work");
  CHECK(c.access_key_id == "WORKKEY");
  CHECK(c.secret_access_key == "work+secret=");
  CHECK(c.session_token == "worktoken");
  {
    ScopedEnvVar profile("AWS_PROFILE", "work");
    CHECK(resolve_credentials().access_key_id == "WORKKEY");
    ScopedEnvVar id("AWS_ACCESS_KEY_ID", "ENVKEY");
    ScopedEnvVar secret("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
    CHECK(resolve_credentials().access_key_id == "ENVKEY");  // the environment wins
  }
  CHECK_THROWS_AS(resolve_credentials("incomplete"), InvalidArgument);
  try {
    resolve_credentials("missing");
    FAIL("a missing profile named explicitly must throw");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()).find("missing") != std::string::npos);
    CHECK(e.context().file == home / ".aws/credentials");
  }

  // AWS_SHARED_CREDENTIALS_FILE replaces ~/.aws/credentials.
  write_file(home / "other", "[default]\naws_access_key_id=OTHER\naws_secret_access_key=S\n");
  ScopedEnvVar file("AWS_SHARED_CREDENTIALS_FILE", home / "other");
  CHECK(resolve_credentials().access_key_id == "OTHER");

  write_file(home / "other", "aws_access_key_id=OUTSIDE\n");
  CHECK_THROWS_AS(resolve_credentials(), InvalidArgument);
  write_file(home / "other", "[default\n");
  try {
    resolve_credentials();
    FAIL("a malformed section must throw");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().line == 1);
    CHECK(e.context().file == home / "other");
  }
}

TEST_CASE("S3 ListObjectsV2 pages parse with entities and truncation", "[s3]") {
  const std::string page1 =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>bucket</Name><Prefix>data/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated>"
      "<Contents><Key>data/a&amp;b &lt;1&gt;.txt</Key><Size>3</Size>"
      "<ETag>&quot;abc&quot;</ETag></Contents>"
      "<!-- a comment -->"
      "<Contents><Key>data/caf&#233;&#x2F;&apos;q&apos;</Key><Size>0</Size></Contents>"
      "<NextContinuationToken>1/tok+en==</NextContinuationToken>"
      "</ListBucketResult>";
  const auto p1 = parse_list_objects_v2(page1);
  REQUIRE(p1.keys.size() == 2);
  CHECK(p1.keys[0] == "data/a&b <1>.txt");
  CHECK(p1.keys[1] == "data/caf\xc3\xa9/'q'");
  CHECK(p1.truncated);
  CHECK(p1.next_token == "1/tok+en==");

  const auto p2 = parse_list_objects_v2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key><![CDATA[x<y]]></Key></Contents><Empty/></ListBucketResult>");
  REQUIRE(p2.keys.size() == 1);
  CHECK(p2.keys[0] == "x<y");
  CHECK_FALSE(p2.truncated);

  CHECK(parse_list_objects_v2("<ListBucketResult/>").keys.empty());
}

TEST_CASE("S3 malformed XML raises IoError naming the URL", "[s3]") {
  const ErrorContext where{.stage = "list", .file = "s3://b/p"};
  const char* bad[] = {
      "",
      "not xml",
      "<ListBucketResult>",
      "<ListBucketResult><Contents></ListBucketResult>",
      "<ListBucketResult><Key>a &bogus; b</Key></ListBucketResult>",
      "<ListBucketResult><Key>&#xD800;</Key></ListBucketResult>",
      "<ListBucketResult><Key>&#99999999;</Key></ListBucketResult>",
      "<ListBucketResult a=b></ListBucketResult>",
      "<ListBucketResult></ListBucketResult><extra/>",
      "<ListBucketResult><!-- unterminated </ListBucketResult>",
      "<Other></Other>",
      "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
      "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
  };
  for (const char* xml : bad) {
    INFO(xml);
    try {
      parse_list_objects_v2(xml, where);
      FAIL("no error");
    } catch (const IoError& e) {
      CHECK(e.context().file == "s3://b/p");
    }
  }
  // Nesting is bounded.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "<a>";
  CHECK_THROWS_AS(parse_xml(deep, where), IoError);
}

TEST_CASE("S3 error bodies give their code and message", "[s3]") {
  const auto e = parse_s3_error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
      "<Message>Please reduce your request rate.</Message><RequestId>1</RequestId></Error>");
  REQUIRE(e);
  CHECK(e->code == "SlowDown");
  CHECK(e->message == "Please reduce your request rate.");
  CHECK_FALSE(parse_s3_error(""));
  CHECK_FALSE(parse_s3_error("<html>oops"));
  CHECK_FALSE(parse_s3_error("<ListBucketResult/>"));
}
