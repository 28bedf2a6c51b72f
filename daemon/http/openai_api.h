// The OpenAI-compatible endpoints over the inference core: /v1/chat/completions,
// /v1/completions (both streaming as server-sent events), /v1/models, /health
// and Prometheus /metrics. JSON in and out through nlohmann-json; field names
// as OpenAI's, plus the extras llama.cpp and vLLM accept (top_k, min_p,
// repetition_penalty, cache_prompt, ignore_eos, chat_template_kwargs) and
// session_id, the daemon's KV sessions shared with gRPC. docs/http-api.md.
#pragma once

#include <functional>
#include <string>

#include "http/http_server.h"
#include "service/inference.h"

namespace qwen3::http {

class OpenAiApi {
 public:
  // `transport_gauges` adds the transports' figures (connections) to a /metrics scrape.
  OpenAiApi(InferenceCore& core, std::string model_id, std::function<void(MetricsGauges&)> transport_gauges);

  void handle(Exchange& ex);
  const std::string& model_id() const { return model_id_; }

 private:
  struct Reply;
  void completion(Exchange& ex, bool chat);
  void reply_whole(Exchange& ex, GenerateOptions o, const Reply& rp);
  void reply_stream(Exchange& ex, GenerateOptions o, const Reply& rp);
  void models(Exchange& ex);
  void health(Exchange& ex);
  void metrics(Exchange& ex);

  InferenceCore& core_;
  std::string model_id_;
  std::function<void(MetricsGauges&)> transport_gauges_;
};

// The model id /v1/models reports: model_name, else the model directory's name.
std::string model_id_of(const DaemonConfig& config);

}  // namespace qwen3::http
