#include "health_check.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <condition_variable>
#include <mutex>
#include <vector>

namespace qwen3::cli {
// Field 1 (service), wire type 2 (length-delimited).
std::string encode_health_request(const std::string& service) {
  if (service.empty()) return {};
  std::string out;
  out.push_back(0x0a);
  size_t n = service.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  return out + service;
}

// Reads field 1 (status, varint); other fields are skipped per wire type.
ServingStatus decode_health_response(const std::string& bytes) {
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; i < bytes.size() && shift < 64; shift += 7) {
      uint8_t b = static_cast<uint8_t>(bytes[i++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  ServingStatus status = ServingStatus::unknown;
  while (i < bytes.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(key)) break;
    switch (key & 7) {
      case 0:
        if (!varint(v)) return status;
        if ((key >> 3) == 1) status = static_cast<ServingStatus>(v <= 3 ? v : 0);
        break;
      case 1: i += 8; break;
      case 2:
        // A length past the end (or one that would wrap) ends the message.
        if (!varint(v) || v > bytes.size() - i) return status;
        i += v;
        break;
      case 5: i += 4; break;
      default: return status;
    }
  }
  return status;
}

const char* to_string(ServingStatus s) {
  switch (s) {
    case ServingStatus::serving: return "SERVING";
    case ServingStatus::not_serving: return "NOT_SERVING";
    case ServingStatus::service_unknown: return "SERVICE_UNKNOWN";
    default: return "UNKNOWN";
  }
}

ServingStatus health_check(DaemonClient& client, const std::string& service,
                           std::chrono::milliseconds timeout) {
  grpc::GenericStub stub(client.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  std::string request = encode_health_request(service);
  grpc::Slice slice(request);
  grpc::ByteBuffer send(&slice, 1);
  grpc::ByteBuffer recv;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &send, &recv,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   cv.notify_one();
                 });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  client.check(status, "health check");
  std::vector<grpc::Slice> slices;
  recv.Dump(&slices);
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return decode_health_response(bytes);
}

}  // namespace qwen3::cli
