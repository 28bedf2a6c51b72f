// The model variants of qwen3-bpf-quant-study and qwen3-bpf-quantize: a
// '+'-joined recipe (parse_variant; the parts are listed in quant_study.cpp's
// header), the calibration it may need (calibrate: the reference's matrix
// inputs on calibration prompts), every matrix rewritten by it in float
// (quantize_model: quantize -> dequantize), and the result written as an F32
// model directory (save_model) that the float reference and the engine load.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "activations.h"
#include "common/worker_pool.h"
#include "model/model_dir.h"
#include "numerics.h"  // QN_GROUP
#include "quantizers.h"
#include "reference/reference_backend.h"

namespace qwen3::quant_study {

struct Variant {
  std::string name;
  RowFormat fmt{8, QN_GROUP, false};  // the engine's group; a variant may study others
  double noise_pct = 0;               // > 0: noise instead of rounding
  bool gptq = false, awq = false, actcols = false, nocols = false, engine = false;
  std::set<std::string> as_q8;  // matrix kinds stored as the engine's q8 (emb8: embed, lmhead)
  int act_group = -1;  // 8-bit activations: -1 off, 0 one scale per vector, else the group
  int act_bfp_bits = 0;       // a8bfp<A>: the engine's A-bit block floating point first
  int act_fix_frac = 0;       // a8fix<F>: inputs rounded to F fraction bits first
  bool act_normed_only = false;  // a8normed: only the RMSNorm outputs' matrices (QKV, gate/up, vocabulary)
  std::string only;    // matrix kind, empty = all
  std::string bpf;     // "" the float reference runs the variant; else the BPF engine at this precision
  int bpf_kv_bits = 8;  // its K/V cache: compact (the daemon's default), or int16 with kv16
  bool needs_calibration() const { return gptq || awq || actcols; }
};

// Parses a recipe; throws qwen3::Error naming an unknown part.
Variant parse_variant(const std::string& s);

// Per matrix input: sum over tokens of x x^T, and of |x|.
struct Calibration {
  std::map<std::string, std::vector<double>> xtx;   // key -> n x n
  std::map<std::string, std::vector<double>> absx;  // key -> n, mean |x_k| once done
  std::map<std::string, int> dim;
  std::map<std::string, double> tokens;
};

Calibration calibrate(ReferenceBackend& ref, const std::vector<std::vector<int32_t>>& prompts);

// A variant's matrices, rewritten, with what its activations and its size need.
struct VariantWeights {
  std::map<std::string, std::vector<float>> data;  // tensor name -> values
  std::map<std::string, InputQuant> inputs;        // matrix input key -> exact columns, awq scales
  double layer_bytes = 0, layer_params = 0, vocab_bytes = 0, vocab_params = 0;
};

// Every matrix of `model` rewritten by the variant (cal: for gptq, awq, actcols; may be null).
VariantWeights quantize_model(const ModelDir& model, const Variant& v, const Calibration* cal, WorkerPool& pool);

// Writes the variant's model (F32; lm_head untied unless the model was tied and the
// variant left both equal; config and tokenizer copied) to dir.
void save_model(const ModelDir& model, const VariantWeights& vw, const std::string& dir);

}  // namespace qwen3::quant_study
