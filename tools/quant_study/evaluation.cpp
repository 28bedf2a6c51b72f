#include "evaluation.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qwen3::quant_study {

namespace {

std::vector<double> log_softmax(const std::vector<float>& logits) {
  double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(x - mx);
  double lse = mx + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); i++) out[i] = logits[i] - lse;
  return out;
}

}  // namespace

double Agreement::ref_ppl() const { return std::exp(nll_ref / std::max(1, scored)); }
double Agreement::ppl() const { return std::exp(nll / std::max(1, scored)); }

void accumulate(Agreement& a, const std::vector<int32_t>& ids, const ForwardResult& r, const ForwardResult& b) {
  for (size_t p = 0; p < r.positions.size(); p++) {
    const auto& rf = r.positions[p].full;
    std::vector<float> sorted = rf;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const bool near_tie = sorted[0] - sorted[1] < 0.05f;
    const bool same = r.positions[p].argmax == b.positions[p].argmax;
    a.positions++;
    if (near_tie) a.near_ties++, a.near_tie_agree += same;
    else a.agree += same;
    auto lr = log_softmax(rf), lb = log_softmax(b.positions[p].full);
    double kl = 0, err = 0;
    for (size_t t = 0; t < lr.size(); t++) {
      kl += std::exp(lr[t]) * (lr[t] - lb[t]);
      err += std::fabs(double(rf[t]) - b.positions[p].full[t]);
    }
    a.kl_sum += kl;
    a.err_sum += err / rf.size();
    if (p + 1 < ids.size()) {
      a.nll_ref -= lr[ids[p + 1]];
      a.nll -= lb[ids[p + 1]];
      a.scored++;
    }
  }
}

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
