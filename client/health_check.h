// grpc.health.v1.Health/Check without generated code: the request for the
// server as a whole is an empty message and the answer is one enum field, so
// a generic call with hand-encoded bytes avoids a second copy of health.proto
// in the process (and a clash if the API library ever links one).
#pragma once

#include <chrono>
#include <string>

#include "daemon_client.h"

namespace qwen3::cli {

enum class ServingStatus { unknown = 0, serving = 1, not_serving = 2, service_unknown = 3 };

const char* to_string(ServingStatus s);

// The wire form of HealthCheckRequest{service} and the status field of a
// HealthCheckResponse (unknown fields skipped; malformed input -> unknown).
std::string encode_health_request(const std::string& service);
ServingStatus decode_health_response(const std::string& bytes);

// Throws CliError (via client.check) when the call itself fails.
ServingStatus health_check(DaemonClient& client, const std::string& service = "",
                           std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace qwen3::cli
