// The XML of S3's responses, read by a small bounded parser: elements, text
// with entities (&amp; &lt; &gt; &quot; &apos; &#NN; &#xHH;), CDATA; a
// prolog, comments and attributes are skipped; nesting at most 64 deep. The
// parser streams (start, text, end events to a handler): ListObjectsV2 pages
// are read without building a tree, in memory proportional to the keys they
// hold; parse_xml's tree (multipart uploads, <Error> bodies) refuses a
// document that would take more than 4 times its size plus 64 KiB. So a
// hostile body costs at most a small multiple of max_response_bytes. AWS
// counterpart: the SDKs' XML deserialisers of the S3 REST API.
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
  /// The local name (any "prefix:" dropped).
  std::string name{};
  /// The character data directly inside the element, entities decoded.
  std::string text{};
  /// The child elements, in document order.
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

/// A streaming XML parser: parse_document(handler) calls
/// handler.start(local_name, depth), handler.text(piece, depth) (character
/// data of the element at `depth`, in pieces: entities decoded, CDATA as is)
/// and handler.end(depth). It allocates nothing per element. A handler may
/// throw (fail() gives the IoError with the offset).
class XmlParser {
 public:
  XmlParser(std::string_view in, const ErrorContext& where) : in_(in), where_(where) {}

  template <class Handler>
  void parse_document(Handler& handler) {
    skip_misc();
    if (!starts_with("<") || starts_with("</")) fail("no root element");
    parse_element(handler);
    skip_misc();
    if (pos_ != in_.size()) fail("content after the root element");
  }

  [[noreturn]] void fail(const std::string& what) const {
    ErrorContext c = where_;
    c.offset = pos_;
    throw IoError("malformed XML in an S3 response: " + what, c);
  }

 private:
  static constexpr int kMaxDepth = 64;

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
  static std::string_view local_name(std::string_view qname) {
    const auto colon = qname.find(':');
    return colon == std::string_view::npos ? qname : qname.substr(colon + 1);
  }
  template <class Out>
  static void append_utf8(Out& out, std::uint32_t cp) {
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
  template <class Out>
  void parse_entity(Out& out) {
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
  // A small fixed buffer an entity decodes into (at most 4 bytes).
  struct Piece {
    char bytes[4];
    std::size_t size = 0;
    void push_back(char c) { bytes[size++] = c; }
  };

  // Elements are walked with an explicit stack of their names (views into
  // the input), so the depth bound costs no recursion.
  template <class Handler>
  void parse_element(Handler& handler) {
    std::string_view open[kMaxDepth];
    int depth = 0;
    auto start_tag = [&] {
      if (depth >= kMaxDepth) fail("elements nested deeper than 64");
      ++pos_;  // '<'
      const std::string_view qname = parse_name();
      handler.start(local_name(qname), depth);
      if (skip_attributes()) {
        handler.end(depth);
        return;
      }
      open[depth++] = qname;
    };
    start_tag();
    while (depth > 0) {
      const std::string_view qname = open[depth - 1];
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
          handler.end(--depth);
        } else if (starts_with("<!--")) {
          skip_past("-->", "comment");
        } else if (starts_with("<![CDATA[")) {
          const std::size_t start = pos_ + 9;
          skip_past("]]>", "CDATA section");
          handler.text(in_.substr(start, pos_ - 3 - start), depth - 1);
        } else if (starts_with("<?")) {
          skip_past("?>", "processing instruction");
        } else {
          start_tag();
        }
      } else if (c == '&') {
        Piece piece;
        parse_entity(piece);
        handler.text(std::string_view(piece.bytes, piece.size), depth - 1);
      } else {
        const auto next = in_.find_first_of("<&", pos_);
        const std::size_t end = next == std::string_view::npos ? in_.size() : next;
        handler.text(in_.substr(pos_, end - pos_), depth - 1);
        pos_ = end;
      }
    }
  }

  std::string_view in_;
  const ErrorContext& where_;
  std::size_t pos_ = 0;
};

}  // namespace detail

namespace detail {

/// Builds parse_xml's tree, counting what it holds: an element costs its
/// node twice over (a vector's spare capacity) plus its name and text.
struct XmlTreeBuilder {
  XmlParser& parser;
  std::size_t budget;
  XmlElement root{};
  std::vector<XmlElement*> path{};
  std::size_t used = 0;

  void charge(std::size_t bytes) {
    used += bytes;
    if (used > budget) {
      parser.fail("the document would take more than " + std::to_string(budget) +
                  " bytes to hold (4 times its size plus 64 KiB)");
    }
  }
  void start(std::string_view name, int) {
    charge(2 * sizeof(XmlElement) + name.size());
    XmlElement* e = &root;
    if (!path.empty()) e = &path.back()->children.emplace_back();
    e->name = std::string(name);
    path.push_back(e);
  }
  void text(std::string_view piece, int) {
    charge(piece.size());
    path.back()->text.append(piece);
  }
  void end(int) { path.pop_back(); }
};

}  // namespace detail

/// Parses one XML document into a tree. Throws IoError naming `where` (the
/// URL) and the byte offset on malformed XML, or on a document that would
/// take more than 4 times its size plus 64 KiB to hold (no S3 document
/// that parse_xml reads comes near it).
inline XmlElement parse_xml(std::string_view xml, const ErrorContext& where = {}) {
  detail::XmlParser parser(xml, where);
  detail::XmlTreeBuilder tree{parser, 4 * xml.size() + (std::size_t{64} << 10)};
  parser.parse_document(tree);
  return std::move(tree.root);
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
  // Streamed, no tree: what is kept is the keys (a string each, at least
  // the 26 bytes of "<Contents><Key/></Contents>" in the input) and two
  // fields; every other element costs nothing.
  struct Page {
    ListObjectsPage page{};
    std::string root{};
    std::string truncated{};
    enum class In { other, contents, key, truncated, token } in = In::other;
    bool has_key = false;
    void start(std::string_view name, int depth) {
      if (depth == 0) {
        root = std::string(name.substr(0, 64));
      } else if (depth == 1) {
        // The first of each, as a tree's child_text would take it.
        in = In::other;
        if (name == "Contents") in = In::contents;
        if (name == "IsTruncated" && !seen_truncated) in = In::truncated;
        if (name == "NextContinuationToken" && !seen_token) in = In::token;
        seen_truncated = seen_truncated || in == In::truncated;
        seen_token = seen_token || in == In::token;
        has_key = false;
      } else if (depth == 2 && in == In::contents && name == "Key" && !has_key) {
        page.keys.emplace_back();
        in = In::key;
        has_key = true;
      }
    }
    void text(std::string_view piece, int depth) {
      if (depth == 2 && in == In::key) page.keys.back().append(piece);
      if (depth == 1 && in == In::truncated && truncated.size() < 16) truncated.append(piece);
      if (depth == 1 && in == In::token) page.next_token.append(piece);
    }
    void end(int depth) {
      if (depth == 2 && in == In::key) in = In::contents;
      if (depth == 1) {
        if (in == In::contents && !has_key) missing_key = true;
        in = In::other;
      }
    }
    bool missing_key = false;
    bool seen_truncated = false, seen_token = false;
  } p;
  detail::XmlParser parser(xml, where);
  parser.parse_document(p);
  if (p.root != "ListBucketResult") {
    throw IoError(
        "an S3 ListObjectsV2 response whose root is <" + p.root + ">, not <ListBucketResult>",
        where);
  }
  if (p.missing_key) throw IoError("an S3 ListObjectsV2 <Contents> without a <Key>", where);
  ListObjectsPage page = std::move(p.page);
  page.truncated = p.truncated == "true";
  if (page.truncated && page.next_token.empty()) {
    throw IoError("a truncated S3 ListObjectsV2 page without a NextContinuationToken", where);
  }
  return page;
}

/// The code and message of an S3 error body (XML: an %Error element), as parse_s3_error
/// returns them.
struct S3ErrorInfo {
  std::string code{};     ///< "NoSuchKey", "SlowDown", "SignatureDoesNotMatch", ...
  std::string message{};  ///< the server's explanation
};

/// Reads an S3 error body (XML: an %Error element holding Code and Message);
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
