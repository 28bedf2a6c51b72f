// Sizes the norm weights and the planted outliers of a generated model by
// running a few calibration tokens through each layer while it is written.
//
// Why: with outliers of ~1000 in a few channels, RMSNorm's denominator is set
// by those channels, so for all the other channels it acts as a fixed linear
// scale. Weights sized from estimates then make the residual either shrink or
// blow up from layer to layer. Measuring the actual activations and setting
// each RMSNorm weight so that its ordinary outputs have rms 1 keeps every
// layer in range, with or without outliers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "common/worker_pool.h"

namespace qwen3::mkmodel {

// The planted outliers ("massive activations"). Real Qwen3 grows them in a few
// MLP neurons of the first layers that fire with a near-constant value; here:
// a constant embedding entry per outlier channel, then in each planting layer
// one dedicated MLP neuron per channel that reads only that channel (whose
// normalized value is nearly constant, the outliers dominating the rms) and
// writes a large value back into it. Every token then carries the same few
// hundred to ~1000 in those channels while the other channels stay O(1).
struct OutlierPlan {
  std::vector<int> channels;
  std::vector<float> embed_value;          // [k] constant over the vocabulary
  std::vector<std::vector<float>> added;   // [planting layer][k] value its MLP adds
  float norm_weight = 0.04f;               // RMSNorm weight of outlier channels (small, as in real models)
  float gate = 6.0f, up = 4.0f;            // pre-activations of the dedicated neurons
  int layers() const { return static_cast<int>(added.size()); }
  bool is_outlier(int64_t ch) const;
  // Dedicated neuron of outlier channel k in a planting layer.
  int64_t neuron(size_t k, int intermediate_size) const { return intermediate_size - 1 - static_cast<int64_t>(k); }
};

class Calibrator {
 public:
  Calibrator(const ModelConfig& config, OutlierPlan plan, uint64_t seed, int threads);

  // Called for every block of rows of every tensor, in file order, after the
  // random values are drawn and before they are written. Adjusts norm weights
  // and the dedicated neurons, and rounds everything to BF16 in place.
  void process(const std::string& name, const std::vector<int64_t>& shape, int64_t first_row, int64_t rows,
               int64_t cols, float* data);

 private:
  void scale_norm(float* gamma);
  void run_attention(int layer);
  void run_mlp(int layer);
  void normalize(const std::vector<float>& gamma, std::vector<float>& out) const;
  void matmul(const std::vector<float>& x, int64_t in, const std::vector<float>& w, int64_t out_rows,
              std::vector<float>& y);

  ModelConfig c_;
  OutlierPlan plan_;
  WorkerPool pool_;
  int sequences_, seq_len_;
  std::vector<int32_t> tokens_;        // calibration tokens, sequences back to back
  std::vector<float> x_;               // their residual stream [tokens][hidden]
  std::vector<std::vector<float>> xn_outlier_;  // [layer][k] mean normalized outlier input of the MLP
  std::map<std::string, std::vector<float>> layer_;  // this layer's tensors, BF16-rounded
};

}  // namespace qwen3::mkmodel
