#include "http/session_api.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "service/session_transfer.h"
#include "sessions/session.h"

namespace qwen3::http {

using nlohmann::json;
namespace bh = boost::beast::http;

namespace {

constexpr std::string_view kRoot = "/v1/sessions";

// An answer other than 200 decided before any work: status, OpenAI error type and code.
struct Refusal {
  int status;
  std::string message;
  const char* type = "invalid_request_error";
  const char* code = nullptr;
};

int status_of(ErrorKind k) {
  switch (k) {
    case ErrorKind::invalid_argument: return 400;
    case ErrorKind::not_found: return 404;
    case ErrorKind::failed_precondition: return 409;
    case ErrorKind::resource_exhausted: return 429;
    case ErrorKind::unavailable: return 503;
    case ErrorKind::internal: return 500;
  }
  return 500;
}

const char* code_of(int status) {
  switch (status) {
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 409: return "conflict";
    case 429: return "resources_exhausted";
    case 503: return "unavailable";
    default: return nullptr;
  }
}

void send_error(Exchange& ex, int status, const std::string& message) {
  json err = {{"message", message},
              {"type", status >= 500 || status == 429 ? "server_error" : "invalid_request_error"},
              {"param", nullptr},
              {"code", code_of(status) ? json(code_of(status)) : json(nullptr)}};
  ex.respond(status, "application/json", json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

void send_json(Exchange& ex, int status, const json& body) {
  ex.respond(status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

int64_t unix_s(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

json session_json(const SessionSnapshot& s, const SessionLimits& limits) {
  return {{"id", s.id},
          {"object", "session"},
          {"owner_uid", s.owner_uid},
          {"positions", s.positions},
          {"history_tokens", s.history_tokens},
          {"max_context", s.max_context},
          {"memory_bytes", s.bytes},
          {"created", unix_s(s.created)},
          {"last_used", unix_s(s.last_used)},
          {"expires", limits.ttl.count() > 0 ? json(unix_s(s.last_used + limits.ttl)) : json(nullptr)},
          {"busy", s.busy}};
}

// The value of ?name=... in the request target ("" when absent; no %-decoding: ids and booleans need none).
std::optional<std::string> query(const Exchange& ex, std::string_view name) {
  const std::string_view target(ex.request().target().data(), ex.request().target().size());
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return std::nullopt;
}

bool query_flag(const Exchange& ex, std::string_view name, bool fallback) {
  const auto v = query(ex, name);
  if (!v) return fallback;
  if (*v == "" || *v == "1" || *v == "true") return true;
  if (*v == "0" || *v == "false") return false;
  throw invalid_argument(std::string(name) + " must be true or false (got '" + printable(*v) + "')");
}

std::optional<std::string> header(const Exchange& ex, std::string_view name) {
  const auto it = ex.request().find(boost::beast::string_view(name.data(), name.size()));
  if (it == ex.request().end()) return std::nullopt;
  return std::string(it->value());
}

void require(const Exchange& ex, bh::verb v, const std::string& what) {
  if (ex.request().method() != v)
    throw Refusal{405, what + " takes " + std::string(bh::to_string(v)) + " only"};
}

void create(InferenceCore& core, Exchange& ex) {
  json body = json::object();
  if (!ex.request().body().empty()) {
    try {
      body = json::parse(ex.request().body());
    } catch (const std::exception& e) {
      throw invalid_argument(std::string("malformed JSON in the request body: ") + e.what());
    }
    if (!body.is_object()) throw invalid_argument("the request body must be a JSON object");
  }
  std::string id;
  if (auto it = body.find("session_id"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) throw invalid_argument("session_id must be a string");
    id = it->get<std::string>();
  }
  if (auto h = header(ex, "X-Session-Id")) {
    if (!id.empty() && id != *h)
      throw invalid_argument("session_id '" + printable(id) + "' and the X-Session-Id header '" + printable(*h) +
                             "' differ: give one, or the same in both");
    id = *h;
  }
  int max_context = 0;
  if (auto it = body.find("max_context"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 24))
      throw invalid_argument("max_context must be an integer in [0, 16777216] (0: the daemon's default_context)");
    max_context = static_cast<int>(it->get<int64_t>());
  }
  const SessionSnapshot s = core.create_session(max_context, id, ex.caller_uid());
  send_json(ex, 201, session_json(s, core.session_limits()));
}

void import_file(InferenceCore& core, Exchange& ex) {
  ImportRequest ir;
  ir.caller = ex.caller_uid();
  // The id to import under: ?session_id=, else the X-Session-Id header (what a gateway routes by), else the file's.
  ir.session_id = query(ex, "session_id").value_or(header(ex, "X-Session-Id").value_or(""));
  ir.recompute = query_flag(ex, "recompute", false);
  ir.cancelled = core.cancellation([&ex] { return ex.client_gone(); });
  if (ex.request().body().empty()) throw invalid_argument("no data: send the export file as the request body");
  try {
    const ImportOutcome r = core.import_session(ex.request().body(), ir);
    json out = session_json(r.session, core.session_limits());
    out["kv_imported"] = r.kv_imported;
    out["recomputed_positions"] = r.recomputed_positions;
    send_json(ex, 201, out);
  } catch (const PermissionDenied& e) {
    throw Refusal{403, e.what()};
  }
}

void one_session(InferenceCore& core, Exchange& ex, const std::string& id, bool export_it) {
  const uint32_t caller = ex.caller_uid();
  if (export_it) {
    require(ex, bh::verb::get, "/v1/sessions/{id}/export");
    const std::string file = core.export_session({id, query_flag(ex, "kv", true), caller});
    ex.respond(200, "application/octet-stream", file);
    return;
  }
  if (ex.request().method() == bh::verb::get) {
    send_json(ex, 200, session_json(core.session(id, caller), core.session_limits()));
  } else if (ex.request().method() == bh::verb::delete_) {
    const uint64_t freed = core.delete_session(id, caller);
    send_json(ex, 200, {{"id", id}, {"object", "session.deleted"}, {"deleted", true}, {"freed_bytes", freed}});
  } else {
    throw Refusal{405, "/v1/sessions/{id} takes GET or DELETE"};
  }
}

void route(InferenceCore& core, Exchange& ex) {
  const std::string_view path = ex.path();
  if (path == kRoot || path == std::string(kRoot) + "/") {
    if (ex.request().method() == bh::verb::post) return create(core, ex);
    if (ex.request().method() != bh::verb::get) throw Refusal{405, "/v1/sessions takes GET or POST"};
    json list = json::array();
    for (const auto& s : core.sessions(ex.caller_uid())) list.push_back(session_json(s, core.session_limits()));
    return send_json(ex, 200, {{"object", "list"}, {"data", list}});
  }
  std::string rest(path.substr(kRoot.size() + 1));
  if (rest == "import") {
    require(ex, bh::verb::post, "/v1/sessions/import");
    return import_file(core, ex);
  }
  bool export_it = false;
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    if (rest.substr(slash) != "/export")
      throw Refusal{404, "no such endpoint: " + printable(path) +
                             " (there are /v1/sessions, /v1/sessions/{id}, /v1/sessions/{id}/export, /v1/sessions/import)"};
    export_it = true;
    rest = rest.substr(0, slash);
  }
  one_session(core, ex, rest, export_it);
}

}  // namespace

bool is_sessions_path(std::string_view path) {
  return path == kRoot || (path.size() > kRoot.size() && path.substr(0, kRoot.size()) == kRoot && path[kRoot.size()] == '/');
}

void handle_sessions(InferenceCore& core, Exchange& ex) {
  try {
    route(core, ex);
  } catch (const Refusal& r) {
    if (ex.status() == 0) send_error(ex, r.status, r.message);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::internal) spdlog::error("HTTP {} failed: {}", ex.path(), e.what());
    if (ex.status() == 0) send_error(ex, status_of(e.kind()), e.what());
  } catch (const std::exception& e) {
    spdlog::error("HTTP {} failed unexpectedly: {}", ex.path(), e.what());
    if (ex.status() == 0) send_error(ex, 500, std::string("internal error: ") + e.what());
  }
}

std::string session_id_of(const Exchange& ex, const std::optional<std::string>& body_session_id) {
  const auto h = header(ex, "X-Session-Id");
  if (body_session_id && h && *body_session_id != *h)
    throw invalid_argument("session_id '" + printable(*body_session_id) + "' and the X-Session-Id header '" +
                           printable(*h) + "' differ: give one, or the same in both");
  if (body_session_id) return *body_session_id;
  return h.value_or("");
}

}  // namespace qwen3::http
