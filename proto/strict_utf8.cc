#include "strict_utf8.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

namespace qwen3bpf::v1 {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

bool valid_utf8(std::string_view s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned c = b[i];
    int n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07;
    else return false;
    if (i + n >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

std::string find_invalid_utf8_field(const Descriptor& type, const std::string& wire) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  while (uint32_t tag = in.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const FieldDescriptor* field = type.FindFieldByNumber(number);
    const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field && delimited &&
        (field->type() == FieldDescriptor::TYPE_STRING || field->type() == FieldDescriptor::TYPE_MESSAGE)) {
      std::string bytes;
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, static_cast<int>(length))) return "";
      if (field->type() == FieldDescriptor::TYPE_STRING) {
        if (!valid_utf8(bytes)) return field->full_name();
      } else {
        const std::string inner = find_invalid_utf8_field(*field->message_type(), bytes);
        if (!inner.empty()) return inner;
      }
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return "";
    }
  }
  return "";
}

grpc::Status strict_utf8_deserialize(grpc::ByteBuffer* buffer, google::protobuf::Message* msg) {
  if (buffer == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "no payload");
  std::vector<grpc::Slice> slices;
  const grpc::Status dumped = buffer->Dump(&slices);
  buffer->Clear();
  if (!dumped.ok()) return dumped;
  std::string wire;
  for (const auto& s : slices) wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (msg->ParseFromString(wire)) return grpc::Status::OK;
  const std::string field = find_invalid_utf8_field(*msg->GetDescriptor(), wire);
  if (!field.empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        field.substr(field.rfind('.') + 1) + " is not valid UTF-8 (field " + field +
                            "); send text as UTF-8");
  // Bytes that do not parse are the caller's mistake too.
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "the request is not a valid " + msg->GetTypeName() + " message (malformed protobuf)");
}

}  // namespace qwen3bpf::v1
