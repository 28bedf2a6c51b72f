#include "session_transfer.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "exit_codes.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

std::string export_session(DaemonClient& client, const std::string& id, bool with_kv) {
  v1::ExportSessionRequest req;
  req.set_session_id(id);
  req.set_without_kv(!with_kv);
  grpc::ClientContext ctx;
  auto reader = client.stub().ExportSession(&ctx, req);
  std::string file;
  v1::SessionChunk chunk;
  while (reader->Read(&chunk)) file += chunk.data();
  client.check(reader->Finish(), "export session " + id);
  return file;
}

Imported import_session(DaemonClient& client, const std::string& file, const std::string& rename, bool recompute) {
  constexpr size_t kChunk = size_t{1} << 20;
  grpc::ClientContext ctx;
  v1::ImportSessionResponse resp;
  auto writer = client.stub().ImportSession(&ctx, &resp);
  for (size_t at = 0; at == 0 || at < file.size(); at += kChunk) {
    v1::ImportSessionRequest msg;
    if (at == 0) {
      msg.set_session_id(rename);
      msg.set_recompute(recompute);
    }
    msg.set_data(file.substr(at, std::min(kChunk, file.size() - std::min(at, file.size()))));
    if (!writer->Write(msg)) break;  // the daemon answered early (an error): Finish() says why
  }
  writer->WritesDone();
  client.check(writer->Finish(), "import session");
  return {resp.session().session_id(), resp.session().positions(), resp.kv_imported(), resp.recomputed_positions()};
}

namespace {

struct Url {
  std::string host, port = "80";
};

Url parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) throw usage_error("--to " + url + ": give a socket path or http://HOST:PORT");
  std::string rest = url.substr(scheme.size());
  rest = rest.substr(0, rest.find('/'));
  Url u;
  const auto colon = rest.rfind(':');
  u.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (colon != std::string::npos) u.port = rest.substr(colon + 1);
  if (u.host.empty()) throw usage_error("--to " + url + ": no host");
  return u;
}

}  // namespace

Imported import_session_http(const std::string& url, const std::string& token, const std::string& file,
                             const std::string& session_id, bool recompute) {
  namespace http = boost::beast::http;
  const Url u = parse_url(url);
  std::string target = "/v1/sessions/import?recompute=" + std::string(recompute ? "true" : "false");
  http::response<http::string_body> res;
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    boost::beast::tcp_stream stream(io);
    stream.connect(resolver.resolve(u.host, u.port));
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, u.host);
    req.set(http::field::content_type, "application/octet-stream");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    req.set("X-Session-Id", session_id);
    req.body() = file;
    req.prepare_payload();
    http::write(stream, req);
    boost::beast::flat_buffer buf;
    http::read(stream, buf, res);
  } catch (const std::exception& e) {
    throw CliError("cannot reach " + url + ": " + e.what(), kExitNoDaemon, "not_running");
  }
  nlohmann::json body = nlohmann::json::parse(res.body(), nullptr, false);
  if (res.result_int() != 201) {
    std::string message = body.is_object() && body.contains("error") ? body["error"].value("message", res.body()) : res.body();
    const int code = res.result_int() == 401 || res.result_int() == 403 ? kExitPermission
                     : res.result_int() == 400                          ? kExitUsage
                                                                        : kExitFailed;
    throw CliError("import session into " + url + " failed (HTTP " + std::to_string(res.result_int()) + "): " + message,
                   code);
  }
  return {body.value("id", ""), body.value("positions", 0), body.value("kv_imported", false),
          body.value("recomputed_positions", 0)};
}

}  // namespace qwen3::cli
