// The XML of S3's responses, read by a small bounded parser: elements, text
// with entities (&amp; &lt; &gt; &quot; &apos; &#NN; &#xHH;), CDATA; a
// prolog, comments and attributes are skipped. Enough for ListObjectsV2,
// multipart uploads and <Error> bodies, never more memory than a fixed
// multiple of the input, nesting at most 64 deep. AWS counterpart: the SDKs'
// XML deserialisers of the S3 REST API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/core/errors.hpp"

namespace ingest::storage {

/// One XML element: its local name (any "prefix:" dropped), its text (the
/// concatenated character data directly inside it) and its children.
struct XmlElement {
  std::string name{};
  std::string text{};
  std::vector<XmlElement> children{};

  /// The first child named `child`, or null.
  const XmlElement* find(std::string_view child) const {
    for (const auto& c : children) {
      if (c.name == child) return &c;
    }
    return nullptr;
  }
  /// The text of the first child named `child`, or "" if there is none.
  std::string child_text(std::string_view child) const {
    const XmlElement* c = find(child);
    return c ? c->text : std::string{};
  }
};

namespace detail {

class XmlParser {
 public:
  XmlParser(std::string_view in, const ErrorContext& where) : in_(in), where_(where) {}

  XmlElement parse_document() {
    skip_misc();
    if (!starts_with("<") || starts_with("</")) fail("no root element");
    XmlElement root = parse_element(0);
    skip_misc();
    if (pos_ != in_.size()) fail("content after the root element");
    return root;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(const std::string& what) const {
    ErrorContext c = where_;
    c.offset = pos_;
    throw IoError("malformed XML in an S3 response: " + what, c);
  }
  bool starts_with(std::string_view s) const { return in_.substr(pos_, s.size()) == s; }
  void skip_space() {
    while (pos_ < in_.size() &&
           (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\r' || in_[pos_] == '\n')) {
      ++pos_;
    }
  }
  void skip_past(std::string_view end, const char* what) {
    const auto e = in_.find(end, pos_);
    if (e == std::string_view::npos) fail(std::string("unterminated ") + what);
    pos_ = e + end.size();
  }
  // Whitespace, the <?xml ...?> prolog, comments and a DOCTYPE.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts_with("<?")) {
        skip_past("?>", "processing instruction");
      } else if (starts_with("<!--")) {
        skip_past("-->", "comment");
      } else if (starts_with("<!DOCTYPE")) {
        skip_past(">", "DOCTYPE");
      } else {
        return;
      }
    }
  }
  static bool name_char(char c) {
    return c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '>' && c != '/' && c != '=' &&
           c != '<' && c != '"' && c != '\'';
  }
  std::string_view parse_name() {
    const std::size_t start = pos_;
    while (pos_ < in_.size() && name_char(in_[pos_])) ++pos_;
    if (pos_ == start) fail("an element without a name");
    return in_.substr(start, pos_ - start);
  }
  static std::string local_name(std::string_view qname) {
    const auto colon = qname.find(':');
    return std::string(colon == std::string_view::npos ? qname : qname.substr(colon + 1));
  }
  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  // At '&': decodes one entity into `out`.
  void parse_entity(std::string& out) {
    const auto semi = in_.find(';', pos_);
    if (semi == std::string_view::npos || semi - pos_ > 12) fail("an unterminated entity");
    const std::string_view name = in_.substr(pos_ + 1, semi - pos_ - 1);
    if (name == "amp") {
      out.push_back('&');
    } else if (name == "lt") {
      out.push_back('<');
    } else if (name == "gt") {
      out.push_back('>');
    } else if (name == "quot") {
      out.push_back('"');
    } else if (name == "apos") {
      out.push_back('\'');
    } else if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      const std::string_view digits = name.substr(hex ? 2 : 1);
      if (digits.empty()) fail("an empty character reference");
      std::uint32_t cp = 0;
      for (const char c : digits) {
        int v = -1;
        if (c >= '0' && c <= '9') v = c - '0';
        if (hex && c >= 'a' && c <= 'f') v = c - 'a' + 10;
        if (hex && c >= 'A' && c <= 'F') v = c - 'A' + 10;
        if (v < 0) fail("a malformed character reference &" + std::string(name) + ";");
        cp = cp * (hex ? 16 : 10) + static_cast<std::uint32_t>(v);
        if (cp > 0x10FFFF) fail("a character reference beyond Unicode");
      }
      if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) fail("an invalid character reference");
      append_utf8(out, cp);
    } else {
      fail("an unknown entity &" + std::string(name) + ";");
    }
    pos_ = semi + 1;
  }
  // Skips attributes up to '>' or "/>"; returns true for a self-closing tag.
  bool skip_attributes() {
    for (;;) {
      skip_space();
      if (pos_ >= in_.size()) fail("an unterminated start tag");
      if (in_[pos_] == '>') {
        ++pos_;
        return false;
      }
      if (starts_with("/>")) {
        pos_ += 2;
        return true;
      }
      parse_name();
      skip_space();
      if (pos_ >= in_.size() || in_[pos_] != '=') fail("an attribute without a value");
      ++pos_;
      skip_space();
      if (pos_ >= in_.size() || (in_[pos_] != '"' && in_[pos_] != '\'')) {
        fail("an unquoted attribute value");
      }
      const char quote = in_[pos_++];
      const auto end = in_.find(quote, pos_);
      if (end == std::string_view::npos) fail("an unterminated attribute value");
      pos_ = end + 1;
    }
  }
  XmlElement parse_element(int depth) {
    if (depth >= kMaxDepth) fail("elements nested deeper than 64");
    ++pos_;  // '<'
    const std::string_view qname = parse_name();
    XmlElement e;
    e.name = local_name(qname);
    if (skip_attributes()) return e;
    for (;;) {
      if (pos_ >= in_.size()) fail("the element <" + std::string(qname) + "> is not closed");
      const char c = in_[pos_];
      if (c == '<') {
        if (starts_with("</")) {
          pos_ += 2;
          const std::string_view end = parse_name();
          if (end != qname) {
            fail("</" + std::string(end) + "> closes <" + std::string(qname) + ">");
          }
          skip_space();
          if (pos_ >= in_.size() || in_[pos_] != '>') fail("a malformed end tag");
          ++pos_;
          return e;
        }
        if (starts_with("<!--")) {
          skip_past("-->", "comment");
        } else if (starts_with("<![CDATA[")) {
          const std::size_t start = pos_ + 9;
          skip_past("]]>", "CDATA section");
          e.text.append(in_.substr(start, pos_ - 3 - start));
        } else if (starts_with("<?")) {
          skip_past("?>", "processing instruction");
        } else {
          e.children.push_back(parse_element(depth + 1));
        }
      } else if (c == '&') {
        parse_entity(e.text);
      } else {
        const auto next = in_.find_first_of("<&", pos_);
        const std::size_t end = next == std::string_view::npos ? in_.size() : next;
        e.text.append(in_.substr(pos_, end - pos_));
        pos_ = end;
      }
    }
  }

  std::string_view in_;
  const ErrorContext& where_;
  std::size_t pos_ = 0;
};

}  // namespace detail

/// Parses one XML document. Throws IoError naming `where` (the URL) and the
/// byte offset on malformed XML.
inline XmlElement parse_xml(std::string_view xml, const ErrorContext& where = {}) {
  return detail::XmlParser(xml, where).parse_document();
}

/// One page of a ListObjectsV2 result.
struct ListObjectsPage {
  std::vector<std::string> keys{};  ///< Contents/Key, in the server's order
  bool truncated{};                 ///< IsTruncated: more pages follow
  std::string next_token{};         ///< NextContinuationToken
};

/// Reads a ListObjectsV2 response body. Throws IoError naming `where` for
/// malformed XML, a root other than ListBucketResult, or a truncated page
/// without a continuation token (which would loop forever).
inline ListObjectsPage parse_list_objects_v2(std::string_view xml, const ErrorContext& where = {}) {
  const XmlElement root = parse_xml(xml, where);
  if (root.name != "ListBucketResult") {
    throw IoError(
        "an S3 ListObjectsV2 response whose root is <" + root.name + ">, not <ListBucketResult>",
        where);
  }
  ListObjectsPage page;
  for (const auto& c : root.children) {
    if (c.name != "Contents") continue;
    const XmlElement* key = c.find("Key");
    if (key == nullptr) throw IoError("an S3 ListObjectsV2 <Contents> without a <Key>", where);
    page.keys.push_back(key->text);
  }
  page.truncated = root.child_text("IsTruncated") == "true";
  page.next_token = root.child_text("NextContinuationToken");
  if (page.truncated && page.next_token.empty()) {
    throw IoError("a truncated S3 ListObjectsV2 page without a NextContinuationToken", where);
  }
  return page;
}

/// The code and message of an S3 <Error> body; nullopt if `body` is not one.
struct S3ErrorInfo {
  std::string code{};     ///< "NoSuchKey", "SlowDown", "SignatureDoesNotMatch", ...
  std::string message{};  ///< the server's explanation
};

/// Reads an S3 error body (<Error><Code>…</Code><Message>…</Message>);
/// nullopt for an empty or non-XML body (a HEAD response, a proxy's page).
inline std::optional<S3ErrorInfo> parse_s3_error(std::string_view body) {
  try {
    const XmlElement root = parse_xml(body);
    if (root.name != "Error") return std::nullopt;
    return S3ErrorInfo{.code = root.child_text("Code"), .message = root.child_text("Message")};
  } catch (const IoError&) {
    return std::nullopt;
  }
}

}  // namespace ingest::storage
