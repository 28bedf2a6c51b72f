// qwen3-bpf-quant-study MODEL_DIR VARIANT... [--work DIR] [--prompts N] [--length L] [--calib N] [--threads T]
//
// How sensitive is a model to weight error, and which int8 quantizer loses
// least? Every VARIANT rewrites all matrices of MODEL_DIR in float
// (quantize -> dequantize, or add noise), writes the result as an F32 model
// under --work, and the float reference of the original is compared with the
// float reference of the variant, teacher-forced on the same prompts and with
// the same metric as tests/engine (argmax agreement excluding near-ties with
// a top-2 margin < 0.05, mean KL). Matrices are grouped as the engine converts
// them (q+k+v, gate+up share their exact columns); lm_head is written
// separately even when tied, since the engine converts it separately.
//
// VARIANT is a '+'-joined list:
//   rtn<G>       int8 round to nearest, absmax scale per group of G columns
//   noise<P>     additive gaussian noise, std = P% of each 64-group's rms
//   mse          per-group scale chosen to minimise the squared error
//   gptq         error-compensating rounding along the row (GPTQ) with the
//                calibration Hessian of the matrix's input
//   actcols      exact columns: weight outliers first, then the free slots
//                by calibration input energy x column max^2
//   nocols       no exact columns at all
//   engine       exactly what the engine's q8 conversion stores (convert_row), read back
//   <M>only      (qkv, o, gateup, down, embed, lmhead) quantize that matrix kind only
// e.g. rtn64  rtn32  noise0.1  rtn64+mse  rtn64+gptq+actcols  engine
// With calibration (any gptq/actcols variant), each variant also reports the
// relative output error of every matrix kind on the calibration inputs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "engine/model_plan.h"
#include "engine/weight_format.h"
#include "op_args.h"
#include "model/model_dir.h"
#include "model/safetensors_writer.h"
#include "model/tensor_layout.h"
#include "reference/reference_backend.h"
#include "common/worker_pool.h"

using namespace qwen3;
namespace fs = std::filesystem;

namespace {

constexpr int kMaxExact = QN_OUT_COLS;  // exact columns per matrix

struct Variant {
  std::string name;
  int group = QN_GROUP;  // the engine's; a variant may study others
  double noise_pct = 0;  // > 0: noise instead of int8
  bool mse = false, gptq = false, actcols = false, nocols = false, engine = false;
  std::string only;  // matrix kind, empty = all
};

Variant parse_variant(const std::string& s) {
  Variant v;
  v.name = s;
  size_t p = 0;
  while (p <= s.size()) {
    size_t e = s.find('+', p);
    if (e == std::string::npos) e = s.size();
    std::string t = s.substr(p, e - p);
    if (t.rfind("rtn", 0) == 0) v.group = std::stoi(t.substr(3));
    else if (t.rfind("noise", 0) == 0) v.noise_pct = std::stod(t.substr(5));
    else if (t == "mse") v.mse = true;
    else if (t == "gptq") v.gptq = true;
    else if (t == "actcols") v.actcols = true;
    else if (t == "nocols") v.nocols = true;
    else if (t == "engine") v.engine = true;
    else if (t.size() > 4 && t.compare(t.size() - 4, 4, "only") == 0) v.only = t.substr(0, t.size() - 4);
    else throw invalid_argument("unknown variant part '" + t + "' in " + s);
    p = e + 1;
  }
  if (v.group < 1 || v.group > 128) throw invalid_argument("group must be 1..128 in " + s);
  return v;
}

// One matrix as the engine converts it: tensors stacked by rows, one input.
struct MatrixSet {
  std::string kind;                 // qkv, o, gateup, down, embed, lmhead
  std::vector<std::string> tensors; // source tensor names, stacked
  std::string input;                // calibration key of its input ("" = embedding lookup)
};

std::vector<MatrixSet> matrix_sets(const ModelConfig& c) {
  std::vector<MatrixSet> out;
  out.push_back({"embed", {"model.embed_tokens.weight"}, ""});
  for (int l = 0; l < c.num_hidden_layers; l++) {
    auto n = [&](const char* s) { return layer_tensor_name(l, s); };
    std::string L = std::to_string(l);
    out.push_back({"qkv", {n("self_attn.q_proj.weight"), n("self_attn.k_proj.weight"), n("self_attn.v_proj.weight")},
                   "attn_norm." + L});
    out.push_back({"o", {n("self_attn.o_proj.weight")}, "attention." + L});
    out.push_back({"gateup", {n("mlp.gate_proj.weight"), n("mlp.up_proj.weight")}, "mlp_norm." + L});
    out.push_back({"down", {n("mlp.down_proj.weight")}, "act." + L});
  }
  out.push_back({"lmhead", {"lm_head.weight"}, "final_norm"});
  return out;
}

// Second moments of each matrix input over the calibration prompts.
struct Calibration {
  std::map<std::string, std::vector<double>> xtx;  // key -> n x n, sum over tokens of x x^T
  std::map<std::string, int> dim;
  std::map<std::string, double> tokens;
};

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int n, int vocab) {
  // As tests/engine: mostly ids from the first 20k, some from anywhere.
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 8 == 0 ? rng() % vocab : rng() % 20000);
  return ids;
}

Calibration calibrate(ReferenceBackend& ref, int prompts, int len) {
  Calibration cal;
  ref.set_trace([&](const TracePoint& p) {
    std::string key;
    switch (p.stage) {
      case TraceStage::attn_norm: key = "attn_norm." + std::to_string(p.layer); break;
      case TraceStage::attention: key = "attention." + std::to_string(p.layer); break;
      case TraceStage::mlp_norm: key = "mlp_norm." + std::to_string(p.layer); break;
      case TraceStage::act: key = "act." + std::to_string(p.layer); break;
      case TraceStage::final_norm: key = "final_norm"; break;
      default: return;
    }
    const int n = p.cols;
    auto& m = cal.xtx[key];
    if (m.empty()) m.assign(size_t(n) * n, 0.0);
    cal.dim[key] = n;
    cal.tokens[key] += p.rows;
    for (int r = 0; r < p.rows; r++) {
      const float* x = p.data + size_t(r) * n;
      for (int i = 0; i < n; i++) {
        const double xi = x[i];
        double* row = &m[size_t(i) * n];
        for (int j = 0; j <= i; j++) row[j] += xi * x[j];
      }
    }
  });
  std::mt19937_64 rng(99);  // not the evaluation prompts' seed
  ForwardWants w;
  w.all_positions = true;
  for (int i = 0; i < prompts; i++) {
    auto ids = random_prompt(rng, len, ref.config().vocab_size);
    auto kv = ref.create_kv(len);
    ref.forward(*kv, ids, w);
  }
  ref.set_trace({});
  for (auto& [key, m] : cal.xtx) {
    const int n = cal.dim[key];
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) m[size_t(i) * n + j] = m[size_t(j) * n + i];
  }
  return cal;
}

// Upper Cholesky factor U of H^-1 (H^-1 = U^T U), as GPTQ uses it; H damped by
// 1% of its mean diagonal, dead inputs get a unit diagonal.
std::vector<double> gptq_factor(std::vector<double> h, int n) {
  double mean = 0;
  for (int i = 0; i < n; i++) mean += h[size_t(i) * n + i];
  mean /= n;
  for (int i = 0; i < n; i++) {
    double& d = h[size_t(i) * n + i];
    if (d <= 0) d = 1;
    d += 0.01 * mean;
  }
  // Cholesky H = L L^T (lower, in place)
  auto chol = [n](std::vector<double>& a) {
    for (int j = 0; j < n; j++) {
      double s = a[size_t(j) * n + j];
      for (int k = 0; k < j; k++) s -= a[size_t(j) * n + k] * a[size_t(j) * n + k];
      if (!(s > 0)) throw Error("gptq: Hessian not positive definite");
      const double d = std::sqrt(s);
      a[size_t(j) * n + j] = d;
      for (int i = j + 1; i < n; i++) {
        double t = a[size_t(i) * n + j];
        for (int k = 0; k < j; k++) t -= a[size_t(i) * n + k] * a[size_t(j) * n + k];
        a[size_t(i) * n + j] = t / d;
      }
      for (int i = 0; i < j; i++) a[size_t(i) * n + j] = 0;
    }
  };
  chol(h);
  // inverse of L, then H^-1 = L^-T L^-1
  std::vector<double> li(size_t(n) * n, 0.0);
  for (int i = 0; i < n; i++) {
    li[size_t(i) * n + i] = 1.0 / h[size_t(i) * n + i];
    for (int j = 0; j < i; j++) {
      double s = 0;
      for (int k = j; k < i; k++) s += h[size_t(i) * n + k] * li[size_t(k) * n + j];
      li[size_t(i) * n + j] = -s / h[size_t(i) * n + i];
    }
  }
  std::vector<double> hinv(size_t(n) * n, 0.0);
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++) {
      double s = 0;
      for (int k = i; k < n; k++) s += li[size_t(k) * n + i] * li[size_t(k) * n + j];
      hinv[size_t(i) * n + j] = hinv[size_t(j) * n + i] = s;
    }
  // GPTQ's upper factor U (H^-1 = U^T U) is the transpose of the lower Cholesky factor.
  chol(hinv);
  std::vector<double> u(size_t(n) * n, 0.0);
  for (int i = 0; i < n; i++)
    for (int j = i; j < n; j++) u[size_t(i) * n + j] = hinv[size_t(j) * n + i];
  return u;
}

double quant1(double w, double s) {
  if (s <= 0) return 0;
  double q = std::nearbyint(w / s);
  return std::clamp(q, -127.0, 127.0) * s;
}

// Absmax scale, or the scale minimising the group's squared error.
double group_scale(const double* w, const bool* exact, int n, bool mse) {
  double mx = 0;
  for (int k = 0; k < n; k++)
    if (!exact[k]) mx = std::max(mx, std::fabs(w[k]));
  const double s0 = mx / 127.0;
  if (!mse || s0 == 0) return s0;
  double best = s0, best_err = 1e300;
  for (int t = -40; t <= 40; t++) {
    const double s = s0 * (1.0 + 0.0005 * t);
    double err = 0;
    for (int k = 0; k < n; k++)
      if (!exact[k]) {
        const double d = w[k] - quant1(w[k], s);
        err += d * d;
      }
    if (err < best_err) best_err = err, best = s;
  }
  return best;
}

struct SetResult {
  double err2 = 0, w2 = 0;  // squared weight error, squared weights (non-exact)
  double oerr2 = 0, ow2 = 0;  // the same for the outputs on the calibration inputs (d^T H d)
};

// Exactly what the q8 conversion stores (weight_format.cpp + q8_quantizer.cpp), read back as float.
SetResult engine_q8_set(const MatrixSet& set, std::vector<float>& w, int64_t rows, int64_t cols,
                        const std::vector<float>& col_max, WorkerPool& pool) {
  SetResult res;
  const std::vector<uint32_t> ocols = engine::pick_outlier_columns(col_max);
  double max_abs = 0;
  for (int64_t c = 0; c < cols; c++)
    if (std::find(ocols.begin(), ocols.end(), uint32_t(c)) == ocols.end()) max_abs = std::max(max_abs, double(col_max[c]));
  const int frac = engine::weight_frac_for(max_abs, Precision::q8, set.tensors[0].c_str());
  const size_t row_bytes = engine::row_bytes_for(uint32_t(cols), Precision::q8);
  std::vector<SetResult> part(pool.size());
  std::atomic<int> next_slot{0};
  pool.parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    SetResult& pr = part[next_slot++];
    std::vector<uint8_t> buf(row_bytes);
    for (int64_t r = r0; r < r1; r++) {
      std::span<float> row(&w[r * cols], cols);
      engine::convert_row(row, Precision::q8, frac, buf.data(), set.tensors[0].c_str(), ocols);
      for (int64_t c = 0; c < cols; c++) {
        const double q = engine::dequant(buf.data(), uint32_t(c), Precision::q8, frac, uint32_t(cols), ocols);
        if (std::find(ocols.begin(), ocols.end(), uint32_t(c)) == ocols.end()) {
          pr.err2 += (q - row[c]) * (q - row[c]);
          pr.w2 += double(row[c]) * row[c];
        }
        row[c] = static_cast<float>(q);
      }
    }
  });
  for (auto& p : part) res.err2 += p.err2, res.w2 += p.w2;
  return res;
}

// Quantizes (or perturbs) the stacked matrix w (rows x cols) in place.
SetResult process_set(const Variant& v, const MatrixSet& set, std::vector<float>& w, int64_t rows, int64_t cols,
                      const Calibration* cal, WorkerPool& pool) {
  SetResult res;
  if (!v.only.empty() && v.only != set.kind) return res;
  std::vector<uint32_t> exact;
  std::vector<float> col_max(cols, 0.0f);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) col_max[c] = std::max(col_max[c], std::fabs(w[r * cols + c]));

  if (v.engine) return engine_q8_set(set, w, rows, cols, col_max, pool);
  if (!v.nocols) exact = engine::pick_outlier_columns(col_max);
  if (v.actcols && cal && !set.input.empty()) {
    const auto& h = cal->xtx.at(set.input);
    std::vector<uint32_t> idx(cols);
    for (uint32_t i = 0; i < idx.size(); i++) idx[i] = i;
    auto score = [&](uint32_t c) { return h[size_t(c) * cols + c] * double(col_max[c]) * col_max[c]; };
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return score(a) > score(b); });
    for (uint32_t c : idx) {
      if (exact.size() >= kMaxExact) break;
      if (std::find(exact.begin(), exact.end(), c) == exact.end()) exact.push_back(c);
    }
  }
  std::vector<char> is_exact(cols, 0);
  for (uint32_t c : exact) is_exact[c] = 1;

  std::vector<double> u;
  if (v.gptq && cal && !set.input.empty()) u = gptq_factor(cal->xtx.at(set.input), int(cols));
  const std::vector<double>* h = cal && !set.input.empty() ? &cal->xtx.at(set.input) : nullptr;
  auto quad = [&](const std::vector<double>& x) {  // x^T H x
    double q = 0;
    for (int64_t i = 0; i < cols; i++) {
      const double* hi = &(*h)[size_t(i) * cols];
      double t = 0;
      for (int64_t j = 0; j < cols; j++) t += hi[j] * x[j];
      q += x[i] * t;
    }
    return q;
  };

  std::vector<SetResult> part(pool.size());
  std::atomic<int> next_slot{0};
  const uint64_t seed = std::hash<std::string>{}(set.tensors[0]) ^ uint64_t(v.noise_pct * 1e6);
  pool.parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    SetResult& pr = part[next_slot++];
    std::vector<double> row(cols), orig(cols);
    bool ex[128];
    for (int64_t r = r0; r < r1; r++) {
      for (int64_t c = 0; c < cols; c++) orig[c] = row[c] = w[r * cols + c];
      if (v.noise_pct > 0) {
        std::mt19937_64 rng(seed + uint64_t(r) * 0x9e3779b97f4a7c15ull);
        std::normal_distribution<double> nd(0.0, 1.0);
        for (int64_t c0 = 0; c0 < cols; c0 += v.group) {  // noise scaled per group, as int8's scales
          const int64_t n = std::min<int64_t>(v.group, cols - c0);
          double ss = 0;
          int cnt = 0;
          for (int64_t k = 0; k < n; k++)
            if (!is_exact[c0 + k]) ss += row[c0 + k] * row[c0 + k], cnt++;
          const double sd = cnt ? v.noise_pct / 100.0 * std::sqrt(ss / cnt) : 0;
          for (int64_t k = 0; k < n; k++)
            if (!is_exact[c0 + k]) row[c0 + k] += sd * nd(rng);
        }
      } else if (u.empty()) {
        for (int64_t c0 = 0; c0 < cols; c0 += v.group) {
          const int64_t n = std::min<int64_t>(v.group, cols - c0);
          for (int64_t k = 0; k < n; k++) ex[k] = is_exact[c0 + k];
          const double s = group_scale(&row[c0], ex, int(n), v.mse);
          for (int64_t k = 0; k < n; k++)
            if (!ex[k]) row[c0 + k] = quant1(row[c0 + k], s);
        }
      } else {
        // GPTQ: quantize column by column, pushing each rounding error onto the
        // columns not yet quantized through the inverse Hessian's factor.
        double s = 0;
        for (int64_t i = 0; i < cols; i++) {
          if (i % v.group == 0) {
            const int64_t n = std::min<int64_t>(v.group, cols - i);
            for (int64_t k = 0; k < n; k++) ex[k] = is_exact[i + k];
            s = group_scale(&row[i], ex, int(n), v.mse);
          }
          if (is_exact[i]) continue;
          const double q = quant1(row[i], s);
          const double e = (row[i] - q) / u[size_t(i) * cols + i];
          row[i] = q;
          const double* ui = &u[size_t(i) * cols];
          for (int64_t j = i + 1; j < cols; j++) row[j] -= e * ui[j];
        }
      }
      for (int64_t c = 0; c < cols; c++) {
        if (is_exact[c]) continue;
        const double d = row[c] - orig[c];
        pr.err2 += d * d;
        pr.w2 += orig[c] * orig[c];
        w[r * cols + c] = static_cast<float>(row[c]);
      }
      if (h) {
        pr.ow2 += quad(orig);
        for (int64_t c = 0; c < cols; c++) orig[c] = row[c] - orig[c];
        pr.oerr2 += quad(orig);
      }
    }
  });
  for (auto& p : part) res.err2 += p.err2, res.w2 += p.w2, res.oerr2 += p.oerr2, res.ow2 += p.ow2;
  return res;
}

// Writes the variant's model (F32, lm_head untied) to dir.
void write_variant(const ModelDir& model, const Variant& v, const Calibration* cal, const std::string& dir,
                   WorkerPool& pool) {
  fs::create_directories(dir);
  const ModelConfig& c = model.config();
  std::map<std::string, std::vector<float>> data;
  std::map<std::string, double> err2, w2, oerr2, ow2;
  for (const MatrixSet& set : matrix_sets(c)) {
    std::vector<float> w;
    int64_t rows = 0, cols = 0;
    std::vector<int64_t> row_counts;
    for (const std::string& name : set.tensors) {
      const TensorView& t = name == "lm_head.weight" ? model.lm_head() : model.tensor(name);
      cols = t.cols();
      row_counts.push_back(t.rows());
      rows += t.rows();
      size_t off = w.size();
      w.resize(off + t.numel());
      t.to_float(std::span<float>(&w[off], t.numel()));
    }
    SetResult r = process_set(v, set, w, rows, cols, cal, pool);
    err2[set.kind] += r.err2;
    w2[set.kind] += r.w2;
    oerr2[set.kind] += r.oerr2;
    ow2[set.kind] += r.ow2;
    size_t off = 0;
    for (size_t i = 0; i < set.tensors.size(); i++) {
      size_t n = size_t(row_counts[i]) * cols;
      data[set.tensors[i]].assign(w.begin() + off, w.begin() + off + n);
      off += n;
    }
  }
  std::printf("  %s: relative weight error (rms, non-exact entries):", v.name.c_str());
  for (auto& [k, e] : err2)
    if (w2[k] > 0) std::printf(" %s %.3g%%", k.c_str(), 100.0 * std::sqrt(e / w2[k]));
  std::printf("\n");
  if (cal) {
    std::printf("  %s: relative output error on the calibration inputs:", v.name.c_str());
    for (auto& [k, e] : oerr2)
      if (ow2[k] > 0) std::printf(" %s %.3g%%", k.c_str(), 100.0 * std::sqrt(e / ow2[k]));
    std::printf("\n");
  }

  std::vector<TensorDecl> decls;
  auto layout = qwen3_tensor_layout(c, true);
  for (const TensorSpec& s : layout) decls.push_back({s.name, DType::f32, s.shape});
  SafetensorsWriter writer(dir + "/model.safetensors", decls, {{"format", "pt"}});
  for (const TensorSpec& s : layout) {
    auto it = data.find(s.name);
    if (it != data.end()) {
      writer.write(it->second.data(), it->second.size() * 4);
    } else {
      const TensorView& t = model.tensor(s.name);
      std::vector<float> f(t.numel());
      t.to_float(f);
      writer.write(f.data(), f.size() * 4);
    }
  }
  writer.finish();
  auto cfg = nlohmann::json::parse(read_text_file(model.path() + "/config.json"));
  cfg["tie_word_embeddings"] = false;
  cfg["torch_dtype"] = "float32";
  std::ofstream(dir + "/config.json") << cfg.dump(2) << "\n";
  for (const char* f : {"generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
    fs::path src = fs::path(model.path()) / f;
    if (fs::exists(src)) fs::copy_file(src, fs::path(dir) / f, fs::copy_options::overwrite_existing);
  }
}

struct Agreement {
  int positions = 0, agree = 0, near_ties = 0, near_tie_agree = 0;
  double kl_sum = 0, err_sum = 0;
};

std::vector<double> log_softmax(const std::vector<float>& logits) {
  double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(x - mx);
  double lse = mx + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); i++) out[i] = logits[i] - lse;
  return out;
}

void accumulate(Agreement& a, const ForwardResult& r, const ForwardResult& b) {
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
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, work = "/tmp/qwen3-quant-study";
  std::vector<std::string> names;
  int prompts = 20, length = 52, calib = 8, threads = 2;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&] {
      if (i + 1 >= argc) throw invalid_argument(a + " needs a value");
      return std::string(argv[++i]);
    };
    try {
      if (a == "--work") work = val();
      else if (a == "--prompts") prompts = std::stoi(val());
      else if (a == "--length") length = std::stoi(val());
      else if (a == "--calib") calib = std::stoi(val());
      else if (a == "--threads") threads = std::stoi(val());
      else if (model_dir.empty()) model_dir = a;
      else names.push_back(a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
  }
  if (model_dir.empty() || names.empty()) {
    std::fprintf(stderr,
                 "usage: qwen3-bpf-quant-study MODEL_DIR VARIANT... [--work DIR] [--prompts N] [--length L] "
                 "[--calib N] [--threads T]\n");
    return 2;
  }
  try {
    auto model = ModelDir::open(model_dir);
    ReferenceBackend ref(model, threads);
    WorkerPool pool(threads);
    std::vector<Variant> variants;
    bool need_cal = false;
    for (auto& n : names) {
      variants.push_back(parse_variant(n));
      need_cal |= variants.back().gptq || variants.back().actcols;
    }
    Calibration cal;
    if (need_cal) {
      auto t0 = std::chrono::steady_clock::now();
      cal = calibrate(ref, calib, length);
      std::printf("calibration: %d prompts x %d tokens in %.1f s\n", calib, length,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::vector<std::shared_ptr<const ModelDir>> vmodels;
    std::vector<std::unique_ptr<ReferenceBackend>> vrefs;
    for (auto& v : variants) {
      std::string dir = work + "/" + fs::path(model_dir).filename().string() + "-" + v.name;
      write_variant(*model, v, need_cal ? &cal : nullptr, dir, pool);
      vmodels.push_back(ModelDir::open(dir));
      vrefs.push_back(std::make_unique<ReferenceBackend>(vmodels.back(), threads));
    }
    std::vector<Agreement> agg(variants.size());
    std::mt19937_64 rng(2024);  // the prompts of tests/engine
    ForwardWants w;
    w.all_positions = true;
    w.full_logits = true;
    for (int i = 0; i < prompts; i++) {
      auto ids = random_prompt(rng, length, model->config().vocab_size);
      auto kv = ref.create_kv(length);
      ForwardResult r = ref.forward(*kv, ids, w);
      for (size_t k = 0; k < variants.size(); k++) {
        auto kv2 = vrefs[k]->create_kv(length);
        accumulate(agg[k], r, vrefs[k]->forward(*kv2, ids, w));
      }
    }
    std::printf("%-28s %9s %14s %10s %10s %12s\n", "variant", "agree%", "(n/decided)", "near-ties", "mean KL",
                "mean|dlogit|");
    for (size_t k = 0; k < variants.size(); k++) {
      const Agreement& a = agg[k];
      const int decided = a.positions - a.near_ties;
      std::printf("%-28s %8.2f%% %6d/%-7d %4d/%-5d %10.3g %12.3g\n", variants[k].name.c_str(),
                  100.0 * a.agree / std::max(1, decided), a.agree, decided, a.near_tie_agree, a.near_ties,
                  a.kl_sum / a.positions, a.err_sum / a.positions);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quant-study: %s\n", e.what());
    return 1;
  }
  return 0;
}
