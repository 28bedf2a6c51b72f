// Invalid UTF-8 in a request's string field is the caller's mistake: report it
// as INVALID_ARGUMENT naming the field, instead of gRPC's bare INTERNAL for a
// failed parse. This header is force-included into the generated gRPC code
// (see CMakeLists.txt) so that the server handlers of the requests carrying
// free text deserialize through strict_utf8_deserialize().
#pragma once

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include <string_view>

#include "qwen3bpf/v1/qwen3bpf.pb.h"

namespace qwen3bpf::v1 {

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
// the one check every API of the daemon applies to text it is given.
bool valid_utf8(std::string_view s);

// Parses `buffer` into `msg`; on failure names the first string field holding
// invalid UTF-8 (INVALID_ARGUMENT) or reports a malformed message (INVALID_ARGUMENT too).
grpc::Status strict_utf8_deserialize(grpc::ByteBuffer* buffer, google::protobuf::Message* msg);
// The full name of the first string field with invalid UTF-8 in the wire bytes, or "".
std::string find_invalid_utf8_field(const google::protobuf::Descriptor& type, const std::string& wire);

}  // namespace qwen3bpf::v1

#define QWEN3BPF_STRICT_UTF8_TRAITS(Type)                                                                  \
  template <>                                                                                              \
  class grpc::SerializationTraits<qwen3bpf::v1::Type, void> {                                              \
   public:                                                                                                 \
    static grpc::Status Serialize(const grpc::protobuf::MessageLite& msg, grpc::ByteBuffer* bb,            \
                                  bool* own_buffer) {                                                      \
      return grpc::GenericSerialize<grpc::ProtoBufferWriter, qwen3bpf::v1::Type>(msg, bb, own_buffer);     \
    }                                                                                                      \
    static grpc::Status Deserialize(grpc::ByteBuffer* buffer, qwen3bpf::v1::Type* msg) {                   \
      return qwen3bpf::v1::strict_utf8_deserialize(buffer, msg);                                           \
    }                                                                                                      \
  };

// Unary handlers deserialize through the MessageLite base type: route this
// package's messages through the strict path, everything else as gRPC does.
template <>
class grpc::SerializationTraits<grpc::protobuf::MessageLite, void> {
 public:
  static grpc::Status Serialize(const grpc::protobuf::MessageLite& msg, grpc::ByteBuffer* bb, bool* own_buffer) {
    return grpc::GenericSerialize<grpc::ProtoBufferWriter, grpc::protobuf::MessageLite>(msg, bb, own_buffer);
  }
  static grpc::Status Deserialize(grpc::ByteBuffer* buffer, grpc::protobuf::MessageLite* msg) {
    auto* full = dynamic_cast<google::protobuf::Message*>(msg);
    if (full && full->GetDescriptor()->file()->package() == "qwen3bpf.v1")
      return qwen3bpf::v1::strict_utf8_deserialize(buffer, full);
    return grpc::GenericDeserialize<grpc::ProtoBufferReader, grpc::protobuf::MessageLite>(buffer, msg);
  }
};

// Streaming handlers deserialize through the concrete request type.
QWEN3BPF_STRICT_UTF8_TRAITS(TokenizeRequest)
QWEN3BPF_STRICT_UTF8_TRAITS(ForwardRequest)
QWEN3BPF_STRICT_UTF8_TRAITS(GenerateRequest)
QWEN3BPF_STRICT_UTF8_TRAITS(CreateSessionRequest)
QWEN3BPF_STRICT_UTF8_TRAITS(GetSessionRequest)
QWEN3BPF_STRICT_UTF8_TRAITS(DeleteSessionRequest)
QWEN3BPF_STRICT_UTF8_TRAITS(VerifyProgramRequest)
QWEN3BPF_STRICT_UTF8_TRAITS(GenerateVerifiedRequest)
