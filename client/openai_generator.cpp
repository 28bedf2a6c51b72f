#include "openai_generator.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "cli_error.h"

namespace qwen3::cli {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string first_chars(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

}  // namespace

GeneratorUrl parse_generator_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    throw usage_error("--generator-url " + url + ": https is not supported; give an http:// URL (for a remote "
                      "endpoint, a local TLS proxy such as `stunnel` or an SSH tunnel)");
  if (url.rfind(scheme, 0) != 0) throw usage_error("--generator-url " + url + ": give http://HOST[:PORT][/PATH]");
  const std::string rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.pop_back();
  GeneratorUrl u;
  // [v6::addr]:port, host:port or host
  const auto bracket = authority.rfind(']');
  const auto colon = authority.rfind(':');
  const bool has_port = colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
  u.host = has_port ? authority.substr(0, colon) : authority;
  if (u.host.size() >= 2 && u.host.front() == '[' && u.host.back() == ']') u.host = u.host.substr(1, u.host.size() - 2);
  if (has_port) u.port = authority.substr(colon + 1);
  if (u.host.empty()) throw usage_error("--generator-url " + url + ": no host");
  if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos || std::stoul(u.port) > 65535)
    throw usage_error("--generator-url " + url + ": bad port '" + u.port + "'");
  if (ends_with(path, "/chat/completions")) u.target = path;
  else if (ends_with(path, "/v1")) u.target = path + "/chat/completions";
  else u.target = path + "/v1/chat/completions";
  return u;
}

std::string chat_completion_body(const ExternalGenerator& g, const std::vector<qwen3bpf::v1::ChatMessage>& messages) {
  nlohmann::json body = {{"model", g.model}, {"stream", false}, {"temperature", g.temperature}, {"max_tokens", g.max_tokens}};
  body["messages"] = nlohmann::json::array();
  for (const auto& m : messages) body["messages"].push_back({{"role", m.role()}, {"content", m.content()}});
  if (g.seed) body["seed"] = *g.seed;
  return body.dump();
}

ExternalAnswer parse_chat_completion(const std::string& url, int status, const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (status != 200) {
    std::string message = first_chars(body, 400);
    if (j.is_object() && j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) message = e["message"];
      else if (e.is_string()) message = e;
    }
    const int code = status == 401 || status == 403 ? kExitPermission : status == 400 || status == 404 ? kExitUsage : kExitFailed;
    throw CliError("generator " + url + " answered HTTP " + std::to_string(status) + ": " + message, code);
  }
  const nlohmann::json* content = nullptr;
  if (j.is_object() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const auto& c = j["choices"][0];
    if (c.is_object() && c.contains("message") && c["message"].is_object() && c["message"].contains("content"))
      content = &c["message"]["content"];
  }
  if (!content || !(content->is_string() || content->is_null()))
    throw CliError("generator " + url + " answered 200 but not with an OpenAI chat completion (no "
                   "choices[0].message.content): " + first_chars(body, 300), kExitFailed);
  ExternalAnswer a;
  if (content->is_string()) a.content = *content;
  a.finish_reason = j["choices"][0].value("finish_reason", "");
  if (j.contains("usage") && j["usage"].is_object()) a.completion_tokens = j["usage"].value("completion_tokens", 0);
  return a;
}

ExternalAnswer chat_completion(const ExternalGenerator& g, const std::vector<qwen3bpf::v1::ChatMessage>& messages) {
  namespace http = boost::beast::http;
  const GeneratorUrl u = parse_generator_url(g.url);
  http::response<http::string_body> res;
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    boost::beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(g.timeout_s));
    stream.connect(resolver.resolve(u.host, u.port));
    http::request<http::string_body> req{http::verb::post, u.target, 11};
    req.set(http::field::host, u.host);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "application/json");
    if (!g.api_key.empty()) req.set(http::field::authorization, "Bearer " + g.api_key);
    req.body() = chat_completion_body(g, messages);
    req.prepare_payload();
    http::write(stream, req);
    boost::beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::read(stream, buf, parser);
    res = parser.release();
  } catch (const boost::system::system_error& e) {
    const bool timed_out = e.code() == boost::beast::error::timeout;
    throw CliError("cannot reach the generator at " + g.url + " (" + u.host + ":" + u.port + u.target + "): " +
                       (timed_out ? "no answer in " + std::to_string(g.timeout_s) + " s (--generator-timeout)"
                                  : e.code().message()),
                   kExitNoDaemon, "generator_unreachable");
  }
  return parse_chat_completion(g.url, res.result_int(), res.body());
}

}  // namespace qwen3::cli
