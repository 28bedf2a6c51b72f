#include "prompts.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qwen3::quant_study {

std::vector<std::vector<int32_t>> load_passages(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw invalid_argument("cannot read passages file " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw invalid_argument(path + " is not JSON: " + e.what());
  }
  if (!j.contains("prompts") || !j["prompts"].is_array())
    throw invalid_argument(path + " has no \"prompts\" array (see tests/engine/trained_heldout.json)");
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : j["prompts"]) out.push_back(p.at("ids").get<std::vector<int32_t>>());
  if (out.empty()) throw invalid_argument(path + " has no passages");
  return out;
}

std::vector<std::vector<int32_t>> random_prompts(std::mt19937_64& rng, int n, int len, int vocab) {
  std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(len));
  for (auto& ids : out)
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 8 == 0 ? rng() % vocab : rng() % 20000);
  return out;
}

}  // namespace qwen3::quant_study
