// The session endpoints of the HTTP API, so that a fleet needs no gRPC
// (docs/http-api.md, "Session endpoints"): create, list, show, delete, export
// and import KV sessions, with gRPC's ownership rules (a caller sees only its
// own sessions, root all of them; TCP clients are uid kTcpClientUid), and the
// X-Session-Id header that names a request's session.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/http_server.h"
#include "service/inference.h"

namespace qwen3::http {

// /v1/sessions and everything under it.
bool is_sessions_path(std::string_view path);
// Answers a request on such a path (errors included, in OpenAI's error shape).
void handle_sessions(InferenceCore& core, Exchange& ex);

// The session a completion request runs on: the body's session_id, else the
// X-Session-Id header; "" for none. Both given and different: invalid_argument.
std::string session_id_of(const Exchange& ex, const std::optional<std::string>& body_session_id);

}  // namespace qwen3::http
