#include "http/openai_api.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "common/error.h"
#include "http/session_api.h"

namespace qwen3::http {

using nlohmann::json;

namespace {

// An error with OpenAI's JSON shape: {"error": {message, type, param, code}}.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int s, const std::string& message, std::string t = "invalid_request_error", std::string p = "",
           std::string c = "")
      : std::runtime_error(message), status(s), type(std::move(t)), param(std::move(p)), code(std::move(c)) {}
};

ApiError bad(const std::string& param, const std::string& message) { return ApiError(400, message, "invalid_request_error", param); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

// qwen3::Error kinds as HTTP statuses (a busy session is a conflict; the KV
// budget or session count is 429, which OpenAI clients retry later).
ApiError api_error_of(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::invalid_argument: return ApiError(400, e.what());
    case ErrorKind::not_found: return ApiError(404, e.what(), "invalid_request_error", "", "not_found");
    case ErrorKind::failed_precondition: return ApiError(409, e.what(), "invalid_request_error", "", "conflict");
    case ErrorKind::resource_exhausted: return ApiError(429, e.what(), "server_error", "", "resources_exhausted");
    case ErrorKind::unavailable: return ApiError(503, e.what(), "server_error", "", "unavailable");
    case ErrorKind::internal: return ApiError(500, e.what(), "server_error");
  }
  return ApiError(500, e.what(), "server_error");
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "something else";
  }
}

// Typed optional fields: absent or null is "not given"; a wrong type is a 400 naming the field.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}
std::optional<double> number(const json& body, const char* name, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad(name, std::string(name) + " must be a number (got " + type_name(*v) + ")");
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi))
    throw bad(name, std::string(name) + " must be in [" + json(lo).dump() + ", " + json(hi).dump() + "] (got " + v->dump() + ")");
  return d;
}
std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  const std::string range = std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                            v->dump() + ")";
  if (v->is_number_float()) {  // 3.0 is 3; a double outside int64 is out of range, never cast
    const double d = v->get<double>();
    if (d != std::floor(d)) throw bad(name, std::string(name) + " must be an integer (got " + v->dump() + ")");
    if (!(d >= -0x1p63 && d < 0x1p63)) throw bad(name, range);
  } else if (!v->is_number_integer()) {
    throw bad(name, std::string(name) + " must be an integer (got " + type_name(*v) + ")");
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) throw bad(name, range);
  const int64_t i = v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>();
  if (i < lo || i > hi) throw bad(name, range);
  return i;
}
// The first number in `text` that a double cannot hold (for the message), quoted and short.
std::string overflowing_number(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const size_t b = text.find_first_of("-0123456789", i);
    if (b == std::string::npos) break;
    size_t e = b;
    while (e < text.size() && std::strchr("+-.0123456789eE", text[e])) ++e;
    const std::string token = text.substr(b, e - b);
    errno = 0;
    const double d = std::strtod(token.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(d)) return "'" + printable(token, 40) + "'";
    i = e;
  }
  return "a number";
}
std::optional<bool> boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad(name, std::string(name) + " must be a boolean (got " + type_name(*v) + ")");
  return v->get<bool>();
}
std::optional<std::string> string(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw bad(name, std::string(name) + " must be a string (got " + type_name(*v) + ")");
  return v->get<std::string>();
}

// Message content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_of(const json& m, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "].content";
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) throw bad(where, where + " must be a string or an array of text parts (got " + type_name(*it) + ")");
  std::string text;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      throw bad(where, pw + " must be {\"type\": \"text\", \"text\": \"...\"} (only text content is supported)");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<ChatMessage> messages_of(const json& body) {
  const json* v = field(body, "messages");
  if (!v) throw bad("messages", "messages is required: an array of {\"role\", \"content\"}");
  if (!v->is_array()) throw bad("messages", std::string("messages must be an array (got ") + type_name(*v) + ")");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object()) throw bad("messages", "messages[" + std::to_string(i) + "] must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw bad("messages", "messages[" + std::to_string(i) + "].role must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    out.push_back({r, content_of(m, i)});
  }
  return out;
}

// prompt: a string, an array of token ids, or a one-element array of either.
std::vector<int32_t> prompt_of(const json& body, const Tokenizer& tok, int vocab) {
  const json* v = field(body, "prompt");
  if (!v) throw bad("prompt", "prompt is required: a string or an array of token ids");
  const json* p = v;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  else if (p->is_array() && !p->empty() && !(*p)[0].is_number_integer())
    throw bad("prompt", "only one prompt per request is supported (got " + std::to_string(p->size()) + ")");
  // Empty, the core would answer in gRPC's words (prompt, token_ids or messages).
  if (p->is_string() && p->get<std::string>().empty()) throw bad("prompt", "prompt is empty: give text or token ids");
  if (p->is_array() && p->empty()) throw bad("prompt", "prompt is an empty array: give text or token ids");
  if (p->is_string()) return encode_text(tok, p->get<std::string>(), "prompt");
  if (!p->is_array()) throw bad("prompt", std::string("prompt must be a string or an array of token ids (got ") + type_name(*p) + ")");
  std::vector<int32_t> ids;
  for (const json& id : *p) {
    if (!id.is_number_integer()) throw bad("prompt", "prompt as an array must hold token ids (integers)");
    const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() < static_cast<uint64_t>(vocab)
                                                   : id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab;
    if (!in_range) throw bad("prompt", "prompt token id " + id.dump() + " is not in [0, " + std::to_string(vocab) + ")");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

std::vector<std::string> stop_of(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) throw bad("stop", "stop must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad("stop", std::string("stop must be a string or an array of strings (got ") + type_name(*v) + ")");
  }
  if (out.size() > 16) throw bad("stop", "at most 16 stop strings (got " + std::to_string(out.size()) + ")");
  for (const auto& s : out)
    if (s.empty()) throw bad("stop", "stop strings must not be empty");
  return out;
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return std::string(prefix) + buf;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* finish_name(FinishReason r) { return r == FinishReason::length ? "length" : "stop"; }

std::string token_text(const Tokenizer& tok, int32_t id) {
  if (id >= tok.vocab_size()) return "";
  const int32_t one[1] = {id};
  try {
    return tok.decode(one);
  } catch (const std::exception&) {
    return "";
  }
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(c);
  return b;
}

// One token's logprobs, as chat completions give them.
json chat_logprob(const GeneratedToken& t, const Tokenizer& tok, int top) {
  const std::string text = token_text(tok, t.id);
  json alts = json::array();
  for (size_t i = 0; i < t.top.size() && static_cast<int>(i) < top; ++i) {
    const std::string a = token_text(tok, t.top[i].id);
    alts.push_back({{"token", a}, {"logprob", t.top[i].logprob}, {"bytes", bytes_of(a)}});
  }
  return {{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", alts}};
}

// One token's alternatives, as completions give them: {text: logprob} of the top n.
json completion_alternatives(const GeneratedToken& t, const Tokenizer& tok, int top) {
  json alts = json::object();
  for (size_t i = 0; i < t.top.size() && static_cast<int>(i) < top; ++i) alts[token_text(tok, t.top[i].id)] = t.top[i].logprob;
  return alts;
}

json usage_of(const GenerateOutcome& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}},
          // Speculative decoding's drafts, in the fields OpenAI uses for predicted outputs.
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", r.accepted_tokens},
            {"rejected_prediction_tokens", r.draft_tokens - r.accepted_tokens}}}};
}

}  // namespace

std::string model_id_of(const DaemonConfig& config) {
  if (!config.model_name.empty()) return config.model_name;
  std::error_code ec;
  auto dir = std::filesystem::weakly_canonical(config.effective_model_dir(), ec);
  if (ec) dir = config.effective_model_dir();
  std::string name = dir.filename().string();
  if (name.empty()) name = dir.parent_path().filename().string();
  return name.empty() ? "qwen3" : name;
}

OpenAiApi::OpenAiApi(InferenceCore& core, std::string model_id, std::function<void(MetricsGauges&)> transport_gauges)
    : core_(core), model_id_(std::move(model_id)), transport_gauges_(std::move(transport_gauges)) {}

void OpenAiApi::handle(Exchange& ex) {
  const auto method = ex.request().method();
  const std::string path(ex.path());
  try {
    auto only = [&](boost::beast::http::verb v) {
      if (method != v)
        throw ApiError(405, std::string(path) + " takes " + std::string(boost::beast::http::to_string(v)) + " only");
    };
    if (path == "/v1/chat/completions") only(boost::beast::http::verb::post), completion(ex, true);
    else if (path == "/v1/completions") only(boost::beast::http::verb::post), completion(ex, false);
    else if (path == "/v1/models") only(boost::beast::http::verb::get), models(ex);
    else if (path == "/health") only(boost::beast::http::verb::get), health(ex);
    else if (path == "/metrics") only(boost::beast::http::verb::get), metrics(ex);
    else if (is_sessions_path(path)) handle_sessions(core_, ex);
    else throw ApiError(404, "no such endpoint: " + printable(path) +
                             " (there are /v1/chat/completions, /v1/completions, /v1/models, /v1/sessions, /health, /metrics)",
                        "invalid_request_error", "", "unknown_url");
  } catch (const ApiError& e) {
    if (ex.status() == 0) ex.respond(e.status, "application/json", dump(error_body(e)) + "\n");
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::internal) spdlog::error("HTTP {} failed: {}", path, e.what());
    if (ex.status() == 0) ex.respond(api_error_of(e).status, "application/json", dump(error_body(api_error_of(e))) + "\n");
  } catch (const std::exception& e) {
    spdlog::error("HTTP {} failed unexpectedly: {}", path, e.what());
    if (ex.status() == 0)
      ex.respond(500, "application/json", dump(error_body(ApiError(500, std::string("internal error: ") + e.what(), "server_error"))) + "\n");
  }
}

void OpenAiApi::models(Exchange& ex) {
  const json m = {{"id", model_id_}, {"object", "model"}, {"created", std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch() - (std::chrono::steady_clock::now() - core_.started())).count()},
                  {"owned_by", "qwen3-bpfd"}};
  ex.respond(200, "application/json", dump({{"object", "list"}, {"data", json::array({m})}}) + "\n");
}

void OpenAiApi::health(Exchange& ex) {
  const LoadProgress p = core_.progress();
  if (p.state == LoadState::ready && !core_.shutting_down()) {
    ex.respond(200, "application/json", dump({{"status", "ok"}}) + "\n");
    return;
  }
  const std::string state = core_.shutting_down() ? "stopping" : p.state == LoadState::loading ? "loading" : "failed";
  json body = error_body(ApiError(503, state == "loading" ? "loading the model: " + p.text : state == "stopping" ? "the daemon is stopping" : "the model failed to load: " + p.text, "server_error", "", "unavailable"));
  body["status"] = state;
  body["progress"] = p.fraction;
  ex.respond(503, "application/json", dump(body) + "\n");
}

void OpenAiApi::metrics(Exchange& ex) {
  MetricsGauges g = core_.gauges();
  if (transport_gauges_) transport_gauges_(g);
  ex.respond(200, "text/plain; version=0.0.4; charset=utf-8", core_.metrics().render(g));
}

// What a completion's answer is made of, fixed before the generation runs.
struct OpenAiApi::Reply {
  bool chat = false;
  std::string id;
  int64_t created = 0;
  const char* object = "";
  const char* chunk_object = "";
  bool want_logprobs = false;
  int top_logprobs = 0;
  bool include_usage = false;
  std::string session_id;
  const Tokenizer& tok;
};

void OpenAiApi::completion(Exchange& ex, bool chat) {
  json body;
  try {
    body = json::parse(ex.request().body());
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("malformed JSON in the request body: ") + e.what());
  } catch (const json::out_of_range&) {  // a number beyond a double's range, such as 1e309
    throw ApiError(400, "a number in the request body is out of range: " + overflowing_number(ex.request().body()) +
                            " does not fit a 64-bit float; every field has a finite range (docs/http-api.md)");
  }
  if (!body.is_object()) throw ApiError(400, std::string("the request body must be a JSON object (got ") + type_name(body) + ")");

  if (auto model = string(body, "model"); model && *model != model_id_)
    throw ApiError(404, "the model '" + printable(*model) + "' does not exist here; this daemon serves '" + model_id_ +
                            "' (GET /v1/models)", "invalid_request_error", "model", "model_not_found");
  if (auto n = integer(body, "n", INT64_MIN, INT64_MAX); n && *n != 1)
    throw bad("n", "n must be 1: one choice per request (got " + std::to_string(*n) + ")");
  for (const char* unsupported : {"presence_penalty", "frequency_penalty"})
    if (auto v = number(body, unsupported, -2, 2); v && *v != 0)
      throw bad(unsupported, std::string(unsupported) + " is not supported (use repetition_penalty)");
  if (field(body, "tools") || field(body, "functions")) throw bad("tools", "tools and function calling are not supported");

  const Tokenizer& tok = core_.tokenizer();
  GenerateOptions o;
  if (chat) {
    bool thinking = false;
    if (const json* kw = field(body, "chat_template_kwargs")) {
      if (!kw->is_object()) throw bad("chat_template_kwargs", "chat_template_kwargs must be an object");
      if (auto t = boolean(*kw, "enable_thinking")) thinking = *t;
    }
    o.tokens = encode_chat(tok, messages_of(body), thinking);
  } else {
    o.tokens = prompt_of(body, tok, core_.vocab_size());
  }
  auto max_tokens = integer(body, "max_completion_tokens", 1, 1 << 20);
  if (!max_tokens) max_tokens = integer(body, "max_tokens", 1, 1 << 20);
  o.max_new_tokens = core_.max_new_tokens(max_tokens ? static_cast<int>(*max_tokens) : 0);
  if (auto v = number(body, "temperature", 0, 100)) o.sampling.temperature = static_cast<float>(*v);
  if (auto v = number(body, "top_p", 0, 1)) o.sampling.top_p = static_cast<float>(*v);
  if (auto v = integer(body, "top_k", -1, 1 << 24)) o.sampling.top_k = static_cast<int>(*v < 0 ? 0 : *v);  // vLLM: -1 = off
  if (auto v = number(body, "min_p", 0, 1)) o.sampling.min_p = static_cast<float>(*v);
  if (auto v = number(body, "repetition_penalty", 0, 100)) o.sampling.repetition_penalty = static_cast<float>(*v);
  if (auto v = integer(body, "seed", 0, INT64_MAX)) o.sampling.seed = static_cast<uint64_t>(*v);
  o.stop = stop_of(body);
  if (auto v = boolean(body, "ignore_eos")) o.ignore_eos = *v;
  o.session_id = session_id_of(ex, string(body, "session_id"));  // or the X-Session-Id header
  o.cache_prompt = boolean(body, "cache_prompt").value_or(true);
  if (auto v = boolean(body, "speculative")) o.speculative = *v;  // unset: the daemon's config
  if (auto v = string(body, "driver")) {  // unset: the daemon's config (docs/kernel-driver.md)
    if (*v == "kernel") o.driver = Driver::kernel;
    else if (*v == "user") o.driver = Driver::user;
    else throw bad("driver", "driver must be \"kernel\" or \"user\" (got \"" + *v + "\")");
  }
  int top_logprobs = 0;
  bool want_logprobs = false;
  if (chat) {
    want_logprobs = boolean(body, "logprobs").value_or(false);
    top_logprobs = static_cast<int>(integer(body, "top_logprobs", 0, 20).value_or(0));
    if (top_logprobs > 0 && !want_logprobs) throw bad("top_logprobs", "top_logprobs needs logprobs: true");
  } else {
    const auto lp = integer(body, "logprobs", 0, 20);
    want_logprobs = lp.has_value();
    top_logprobs = static_cast<int>(lp.value_or(0));
  }
  if (want_logprobs) o.logprobs = std::max(top_logprobs, 1);  // the core reports the chosen token's with the top n
  const bool stream = boolean(body, "stream").value_or(false);
  bool include_usage = false;
  if (const json* so = field(body, "stream_options")) {
    if (!stream) throw bad("stream_options", "stream_options is only allowed with stream: true");
    if (!so->is_object()) throw bad("stream_options", "stream_options must be an object");
    include_usage = boolean(*so, "include_usage").value_or(false);
  }
  o.caller_uid = ex.caller_uid();
  o.cancelled = [&ex] { return ex.client_gone(); };
  const std::string session_id = o.session_id;

  const Reply rp{chat, random_id(chat ? "chatcmpl-" : "cmpl-"), unix_seconds(), chat ? "chat.completion" : "text_completion",
                 chat ? "chat.completion.chunk" : "text_completion", want_logprobs, top_logprobs, include_usage, session_id, tok};
  if (stream)
    reply_stream(ex, std::move(o), rp);
  else
    reply_whole(ex, std::move(o), rp);
}

// The whole answer in one JSON body once the generation ends.
void OpenAiApi::reply_whole(Exchange& ex, GenerateOptions o, const Reply& rp) {
  json chat_lp = json::array();
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = 0;
  const GenerateOutcome r = core_.generate(std::move(o), [&](const GeneratedToken& t) {
    if (t.has_logprobs) {
      if (rp.chat) {
        chat_lp.push_back(chat_logprob(t, rp.tok, rp.top_logprobs));
      } else {
        const std::string text = token_text(rp.tok, t.id);
        tokens.push_back(text);
        token_lps.push_back(t.logprob);
        tops.push_back(completion_alternatives(t, rp.tok, rp.top_logprobs));
        offsets.push_back(offset);
        offset += text.size();
      }
    }
    return true;
  });
  if (r.finish == FinishReason::cancelled) {
    if (ex.client_gone()) return;  // nobody to answer
    throw ApiError(503, "the daemon is stopping; the generation was cancelled", "server_error", "", "unavailable");
  }
  json choice = {{"index", 0}, {"finish_reason", finish_name(r.finish)}, {"logprobs", nullptr}};
  if (rp.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    if (rp.want_logprobs) choice["logprobs"] = {{"content", chat_lp}};
  } else {
    choice["text"] = r.text;
    if (rp.want_logprobs)
      choice["logprobs"] = {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }
  json resp = {{"id", rp.id}, {"object", rp.object}, {"created", rp.created}, {"model", model_id_},
               {"choices", json::array({choice})}, {"usage", usage_of(r)}};
  if (!r.matched_stop.empty()) resp["stop_sequence"] = r.matched_stop;
  if (!rp.session_id.empty()) resp["session_id"] = rp.session_id;
  ex.respond(200, "application/json", dump(resp) + "\n");
}

// Server-sent events: a chunk per released text, then the finish, the usage if asked, [DONE].
void OpenAiApi::reply_stream(Exchange& ex, GenerateOptions o, const Reply& rp) {
  // Streaming: the head goes out once the core accepted the request (the
  // first token, or the end), so validation errors still get a JSON status.
  bool started = false;
  bool alive = true;
  auto send = [&](const json& chunk) {
    if (!alive) return false;
    if (!started) {
      started = true;
      alive = ex.begin_stream(200, "text/event-stream");
      if (alive && rp.chat) {
        json first = {{"id", rp.id}, {"object", rp.chunk_object}, {"created", rp.created}, {"model", model_id_},
                      {"choices", json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                {"logprobs", nullptr}, {"finish_reason", nullptr}}})}};
        if (rp.include_usage) first["usage"] = nullptr;
        alive = ex.write("data: " + dump(first) + "\n\n");
      }
      if (!alive) return false;
    }
    return alive = ex.write("data: " + dump(chunk) + "\n\n");
  };
  auto delta_chunk = [&](const std::string& text, const json& logprobs, const json& finish) {
    json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish}};
    if (rp.chat) choice["delta"] = text.empty() && !finish.is_null() ? json::object() : json{{"content", text}};
    else choice["text"] = text;
    json c = {{"id", rp.id}, {"object", rp.chunk_object}, {"created", rp.created}, {"model", model_id_}, {"choices", json::array({choice})}};
    if (rp.include_usage) c["usage"] = nullptr;
    return c;
  };
  const GenerateOutcome r = core_.generate(std::move(o), [&](const GeneratedToken& t) {
    if (t.text.empty() && !t.has_logprobs) return !ex.client_gone();
    json lp = nullptr;
    if (t.has_logprobs) {
      if (rp.chat) {
        lp = {{"content", json::array({chat_logprob(t, rp.tok, rp.top_logprobs)})}};
      } else {
        const json alts = completion_alternatives(t, rp.tok, rp.top_logprobs);
        lp = {{"tokens", {token_text(rp.tok, t.id)}}, {"token_logprobs", {t.logprob}}, {"top_logprobs", {alts}}};
      }
    }
    return send(delta_chunk(t.text, lp, nullptr));
  });
  if (r.finish == FinishReason::cancelled) {
    if (!alive || ex.client_gone()) return;
    const ApiError e(503, "the daemon is stopping; the generation was cancelled", "server_error", "", "unavailable");
    if (!started) throw e;
    send(error_body(e));
    ex.end_stream();
    return;
  }
  if (!r.final_text.empty()) send(delta_chunk(r.final_text, nullptr, nullptr));
  send(delta_chunk("", nullptr, finish_name(r.finish)));
  if (rp.include_usage)
    send({{"id", rp.id}, {"object", rp.chunk_object}, {"created", rp.created}, {"model", model_id_}, {"choices", json::array()},
          {"usage", usage_of(r)}});
  if (alive && ex.write("data: [DONE]\n\n")) ex.end_stream();
}

}  // namespace qwen3::http
