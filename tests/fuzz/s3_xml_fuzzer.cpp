// libFuzzer target: S3 response bodies through the XML parser: the tree
// (parse_xml, with its memory bound), the streamed ListObjectsV2 page and
// the <Error> reader, as the s3:// scheme uses them. Any input must end in
// a result or an IoError: never a crash, a hang, deep recursion or memory
// beyond a small multiple of the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <ingest/storage/s3_xml.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  std::size_t total = 0;
  try {
    const ingest::storage::XmlElement root = ingest::storage::parse_xml(xml);
    total += root.name.size() + root.text.size() + root.children.size();
  } catch (const ingest::IoError&) {
  }
  try {
    const auto page = ingest::storage::parse_list_objects_v2(xml);
    for (const auto& key : page.keys) total += key.size();
    total += page.next_token.size() + (page.truncated ? 1 : 0);
  } catch (const ingest::IoError&) {
  }
  if (const auto e = ingest::storage::parse_s3_error(xml)) total += e->code.size();
  return total == 0xffffffff ? 1 : 0;
}
