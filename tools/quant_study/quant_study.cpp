// qwen3-bpf-quant-study MODEL_DIR VARIANT... [--work DIR] [--prompts N] [--length L] [--calib N] [--threads T]
//                       [--passages FILE] [--calib-passages FILE]
//
// How sensitive is a model to weight (and activation) error, and which
// quantizer loses least? Every VARIANT rewrites all matrices of MODEL_DIR in
// float (quantize -> dequantize, or add noise), writes the result as an F32
// model under --work, and the float reference of the original is compared
// with the float reference of the variant, teacher-forced on the same prompts
// and with the same metric as tests/engine (argmax agreement excluding
// near-ties with a top-2 margin < 0.05, mean KL), plus the perplexity of the
// prompts' next tokens under both. Matrices are grouped as the engine
// converts them (q+k+v, gate+up share their exact columns); lm_head is
// written separately even when tied, since the engine converts it separately.
//
// VARIANT is a '+'-joined list:
//   rtn<G>       int8 round to nearest, absmax scale per group of G columns
//   q4g<G>       4-bit codes c - 8 (c in 0..15) per group of G, scale = the
//                group's largest-|w| value / -8 (the Q4_0 convention)
//   noise<P>     additive gaussian noise, std = P% of each 64-group's rms
//   mse          per-group scale chosen to minimise the squared error (q4:
//                also shrunken scales, i.e. clipping, and the other sign)
//   gptq         error-compensating rounding along the row (GPTQ) with the
//                calibration Hessian of the matrix's input
//   awq          activation-aware: columns scaled by (mean |x_k|)^alpha before
//                rounding and back after (the kernel would fold the scale into
//                the previous op), alpha in 0, 0.1 .. 1 chosen per matrix for the
//                least output error on the calibration inputs
//   actcols      exact columns: weight outliers first, then the free slots
//                by calibration input energy x column max^2
//   nocols       no exact columns at all
//   engine       exactly what the engine's q8 conversion stores (convert_row), read back
//   emb8         embedding and lm_head as the engine's q8, whatever the rest is
//   <M>8         (qkv8, o8, gateup8, down8) that matrix kind as the engine's q8
//   a8g<G>       8-bit activations: every matrix input quantized per group of G
//                (-127..127, absmax/127), exact columns' inputs kept float
//   a8vec        the same with one scale per input vector
//   <M>only      (qkv, o, gateup, down, embed, lmhead) quantize that matrix kind only
// e.g. rtn64  noise0.1  rtn64+gptq+actcols  engine  engine+a8g32  q4g32+mse+emb8+a8g32
//
// Prompts: --passages FILE (tests/engine/trained_heldout.json's form) for a
// trained model, else --prompts random prompts of --length ids (seed 2024, as
// tests/engine). Calibration (gptq, awq, actcols; and each variant's output
// error per matrix kind): --calib-passages FILE, else --calib random prompts
// (seed 99). For the shipped model, tools/quant_study/trained_calib.json holds
// held-out passages disjoint from the evaluation ones (calib_passages.py):
//   qwen3-bpf-quant-study build/test-models/trained engine q4g32+mse
//     --passages tests/engine/trained_heldout.json
//     --calib-passages tools/quant_study/trained_calib.json --threads 1
// Results (q4, 8-bit activations, the int8 quantizers): docs/numerics.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "activations.h"
#include "common/error.h"
#include "common/mapped_file.h"
#include "common/worker_pool.h"
#include "engine/model_plan.h"
#include "engine/weight_format.h"
#include "prompts.h"
#include "model/model_dir.h"
#include "model/safetensors_writer.h"
#include "model/tensor_layout.h"
#include "op_args.h"
#include "quantizers.h"
#include "reference/agreement.h"
#include "reference/reference_backend.h"

using namespace qwen3;
using namespace qwen3::quant_study;
namespace fs = std::filesystem;

namespace {

constexpr int kMaxExact = QN_OUT_COLS;  // exact columns per matrix

struct Variant {
  std::string name;
  RowFormat fmt{8, QN_GROUP, false};  // the engine's group; a variant may study others
  double noise_pct = 0;               // > 0: noise instead of rounding
  bool gptq = false, awq = false, actcols = false, nocols = false, engine = false;
  std::set<std::string> as_q8;  // matrix kinds stored as the engine's q8 (emb8: embed, lmhead)
  int act_group = -1;  // 8-bit activations: -1 off, 0 one scale per vector, else the group
  std::string only;    // matrix kind, empty = all
  bool needs_calibration() const { return gptq || awq || actcols; }
};

Variant parse_variant(const std::string& s) {
  Variant v;
  v.name = s;
  size_t p = 0;
  while (p <= s.size()) {
    size_t e = s.find('+', p);
    if (e == std::string::npos) e = s.size();
    std::string t = s.substr(p, e - p);
    try {
      if (t.rfind("rtn", 0) == 0) v.fmt.bits = 8, v.fmt.group = std::stoi(t.substr(3));
      else if (t.rfind("q4g", 0) == 0) v.fmt.bits = 4, v.fmt.group = std::stoi(t.substr(3));
      else if (t.rfind("noise", 0) == 0) v.noise_pct = std::stod(t.substr(5));
      else if (t == "a8vec") v.act_group = 0;
      else if (t.rfind("a8g", 0) == 0) v.act_group = std::stoi(t.substr(3));
      else if (t == "mse") v.fmt.mse = true;
      else if (t == "gptq") v.gptq = true;
      else if (t == "awq") v.awq = true;
      else if (t == "actcols") v.actcols = true;
      else if (t == "nocols") v.nocols = true;
      else if (t == "engine") v.engine = true;
      else if (t == "emb8") v.as_q8.insert({"embed", "lmhead"});
      else if (t == "qkv8" || t == "o8" || t == "gateup8" || t == "down8") v.as_q8.insert(t.substr(0, t.size() - 1));
      else if (t.size() > 4 && t.compare(t.size() - 4, 4, "only") == 0) v.only = t.substr(0, t.size() - 4);
      else throw invalid_argument("");
    } catch (const std::exception&) {
      throw invalid_argument("unknown variant part '" + t + "' in " + s + " (see the header of quant_study.cpp)");
    }
    p = e + 1;
  }
  if (v.fmt.group < 1 || v.fmt.group > 128) throw invalid_argument("group must be 1..128 in " + s);
  if (v.act_group > 4096) throw invalid_argument("activation group must be 1..4096 in " + s);
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

// Per matrix input: sum over tokens of x x^T, and of |x|.
struct Calibration {
  std::map<std::string, std::vector<double>> xtx;   // key -> n x n
  std::map<std::string, std::vector<double>> absx;  // key -> n, mean |x_k| once done
  std::map<std::string, int> dim;
  std::map<std::string, double> tokens;
};

Calibration calibrate(ReferenceBackend& ref, const std::vector<std::vector<int32_t>>& prompts) {
  Calibration cal;
  ref.set_trace([&](const TracePoint& p) {
    const std::string key = input_key(p.stage, p.layer);
    if (key.empty()) return;
    const int n = p.cols;
    auto& m = cal.xtx[key];
    auto& a = cal.absx[key];
    if (m.empty()) m.assign(size_t(n) * n, 0.0), a.assign(n, 0.0);
    cal.dim[key] = n;
    cal.tokens[key] += p.rows;
    for (int r = 0; r < p.rows; r++) {
      const float* x = p.data + size_t(r) * n;
      for (int i = 0; i < n; i++) {
        const double xi = x[i];
        a[i] += std::fabs(xi);
        double* row = &m[size_t(i) * n];
        for (int j = 0; j <= i; j++) row[j] += xi * x[j];
      }
    }
  });
  ForwardWants w;
  w.all_positions = true;
  for (const auto& ids : prompts) {
    auto kv = ref.create_kv(int(ids.size()));
    ref.forward(*kv, ids, w);
  }
  ref.set_trace({});
  for (auto& [key, m] : cal.xtx) {
    const int n = cal.dim[key];
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) m[size_t(i) * n + j] = m[size_t(j) * n + i];
    for (double& a : cal.absx[key]) a /= cal.tokens[key];
  }
  return cal;
}

// The exact columns of a matrix: the engine's weight outliers, then (actcols) the free slots
// by calibration input energy x column max^2.
std::vector<char> exact_columns(const Variant& v, const std::vector<float>& w, int64_t rows, int64_t cols,
                                const std::vector<double>* xtx) {
  std::vector<float> col_max(cols, 0.0f);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) col_max[c] = std::max(col_max[c], std::fabs(w[r * cols + c]));
  std::vector<uint32_t> exact;
  if (!v.nocols) exact = engine::pick_outlier_columns(col_max);
  if (v.actcols && xtx) {
    std::vector<uint32_t> idx(cols);
    for (uint32_t i = 0; i < idx.size(); i++) idx[i] = i;
    auto score = [&](uint32_t c) { return (*xtx)[size_t(c) * cols + c] * double(col_max[c]) * col_max[c]; };
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return score(a) > score(b); });
    for (uint32_t c : idx) {
      if (exact.size() >= kMaxExact) break;
      if (std::find(exact.begin(), exact.end(), c) == exact.end()) exact.push_back(c);
    }
  }
  std::vector<char> is_exact(cols, 0);
  for (uint32_t c : exact) is_exact[c] = 1;
  return is_exact;
}

// A variant's matrices, rewritten, with what its activations and its size need.
struct VariantWeights {
  std::map<std::string, std::vector<float>> data;  // tensor name -> values
  std::map<std::string, InputQuant> inputs;        // matrix input key -> exact columns, awq scales
  double layer_bytes = 0, layer_params = 0, vocab_bytes = 0, vocab_params = 0;
};

VariantWeights quantize_model(const ModelDir& model, const Variant& v, const Calibration* cal, WorkerPool& pool) {
  VariantWeights out;
  std::map<std::string, double> err2, w2, oerr2, ow2;
  std::map<std::string, std::vector<double>> alphas;
  for (const MatrixSet& set : matrix_sets(model.config())) {
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
    const bool has_input = cal && !set.input.empty();
    const bool vocab = set.kind == "embed" || set.kind == "lmhead";
    const bool as_engine = v.engine || v.as_q8.count(set.kind);
    InputQuant iq;
    MatrixResult r;
    double bytes = 4.0 * cols * rows;  // float: a matrix the variant leaves alone
    if (as_engine) {
      std::vector<uint32_t> exact;
      r = engine_q8_matrix(set.tensors[0], w.data(), rows, cols, exact, pool);
      iq.exact.assign(cols, 0);
      for (uint32_t c : exact) iq.exact[c] = 1;
      bytes = double(engine::row_bytes_for(uint32_t(cols), Precision::q8)) * rows;
    } else {
      MatrixJob job;
      job.fmt = v.fmt;
      job.gptq = v.gptq && has_input;
      job.awq = v.awq;
      job.noise_pct = v.noise_pct;
      job.seed = std::hash<std::string>{}(set.tensors[0]) ^ uint64_t(v.noise_pct * 1e6);
      job.xtx = has_input ? &cal->xtx.at(set.input) : nullptr;
      job.absx = has_input ? &cal->absx.at(set.input) : nullptr;
      job.exact = exact_columns(v, w, rows, cols, job.xtx);
      iq.exact = job.exact;
      if (v.only.empty() || v.only == set.kind) {
        r = quantize_matrix(job, w.data(), rows, cols, pool);
        iq.div = r.act_div;
        if (r.awq_alpha >= 0) alphas[set.kind].push_back(r.awq_alpha);
        if (v.noise_pct == 0) bytes = row_bytes(v.fmt, cols) * rows;
      }
    }
    if (!set.input.empty()) out.inputs[set.input] = std::move(iq);
    (vocab ? out.vocab_bytes : out.layer_bytes) += bytes;
    (vocab ? out.vocab_params : out.layer_params) += double(rows) * cols;
    err2[set.kind] += r.err2, w2[set.kind] += r.w2, oerr2[set.kind] += r.oerr2, ow2[set.kind] += r.ow2;
    size_t off = 0;
    for (size_t i = 0; i < set.tensors.size(); i++) {
      size_t n = size_t(row_counts[i]) * cols;
      out.data[set.tensors[i]].assign(w.begin() + off, w.begin() + off + n);
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
  if (!alphas.empty()) {
    std::printf("  %s: awq alpha per matrix:", v.name.c_str());
    for (auto& [k, as] : alphas) {
      std::printf(" %s", k.c_str());
      for (double a : as) std::printf(" %.1f", a);
    }
    std::printf("\n");
  }
  return out;
}

// Writes the variant's model (F32, lm_head untied) to dir.
void save_model(const ModelDir& model, const VariantWeights& vw, const std::string& dir) {
  fs::create_directories(dir);
  const ModelConfig& c = model.config();
  const auto& data = vw.data;
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

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, work = "/tmp/qwen3-quant-study", passages, calib_passages;
  std::vector<std::string> names;
  int prompts = 20, length = 52, calib = 8, threads = 2;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines show as they come, even into a file
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    try {
      auto val = [&] {
        if (i + 1 >= argc) throw invalid_argument(a + " needs a value");
        return std::string(argv[++i]);
      };
      if (a == "--work") work = val();
      else if (a == "--prompts") prompts = std::stoi(val());
      else if (a == "--length") length = std::stoi(val());
      else if (a == "--calib") calib = std::stoi(val());
      else if (a == "--threads") threads = std::stoi(val());
      else if (a == "--passages") passages = val();
      else if (a == "--calib-passages") calib_passages = val();
      else if (model_dir.empty()) model_dir = a;
      else names.push_back(a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", a.c_str(), e.what());
      return 2;
    }
  }
  if (model_dir.empty() || names.empty()) {
    std::fprintf(stderr,
                 "usage: qwen3-bpf-quant-study MODEL_DIR VARIANT... [--work DIR] [--prompts N] [--length L] "
                 "[--calib N] [--threads T] [--passages FILE] [--calib-passages FILE]\n");
    return 2;
  }
  try {
    auto model = ModelDir::open(model_dir);
    const int vocab = model->config().vocab_size;
    ReferenceBackend ref(model, threads);
    WorkerPool pool(threads);
    std::vector<Variant> variants;
    bool need_cal = false;
    for (auto& n : names) {
      variants.push_back(parse_variant(n));
      need_cal |= variants.back().needs_calibration();
    }
    need_cal |= !calib_passages.empty();
    Calibration cal;
    if (need_cal) {
      auto t0 = std::chrono::steady_clock::now();
      std::mt19937_64 crng(99);  // not the evaluation prompts' seed
      auto cp = calib_passages.empty() ? random_prompts(crng, calib, length, vocab) : load_passages(calib_passages);
      cal = calibrate(ref, cp);
      std::printf("calibration: %zu prompts, %.0f tokens in %.1f s\n", cp.size(), cal.tokens["final_norm"],
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::vector<std::shared_ptr<const ModelDir>> vmodels;
    std::vector<std::unique_ptr<ReferenceBackend>> vrefs;
    std::vector<VariantWeights> sizes;
    for (auto& v : variants) {
      auto t0 = std::chrono::steady_clock::now();
      std::string dir = work + "/" + fs::path(model_dir).filename().string() + "-" + v.name;
      VariantWeights vw = quantize_model(*model, v, need_cal ? &cal : nullptr, pool);
      save_model(*model, vw, dir);
      vmodels.push_back(ModelDir::open(dir));
      vrefs.push_back(std::make_unique<ReferenceBackend>(vmodels.back(), threads));
      if (v.act_group >= 0) vrefs.back()->set_matrix_input_hook(act8_hook(v.act_group, std::move(vw.inputs)));
      vw.data.clear();
      sizes.push_back(std::move(vw));
      std::printf("  %s: written in %.1f s\n", v.name.c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::mt19937_64 rng(2024);  // the prompts of tests/engine
    auto eval = passages.empty() ? random_prompts(rng, prompts, length, vocab) : load_passages(passages);
    std::vector<reference::Agreement> agg(variants.size());
    ForwardWants w;
    w.all_positions = true;
    w.full_logits = true;
    for (const auto& ids : eval) {
      auto kv = ref.create_kv(int(ids.size()));
      ForwardResult r = ref.forward(*kv, ids, w);
      for (size_t k = 0; k < variants.size(); k++) {
        auto kv2 = vrefs[k]->create_kv(int(ids.size()));
        reference::accumulate(agg[k], ids, r, vrefs[k]->forward(*kv2, ids, w));
      }
    }
    std::printf("%zu prompts, float perplexity %.4g\n", eval.size(), agg.empty() ? 0.0 : agg[0].ref_ppl());
    std::printf("%-28s %8s %14s %10s %10s %10s %9s %8s %8s\n", "variant", "agree%", "(n/decided)", "near-ties",
                "mean KL", "ppl", "ppl/float", "B/p lay", "B/p voc");
    for (size_t k = 0; k < variants.size(); k++) {
      const reference::Agreement& a = agg[k];
      const VariantWeights& s = sizes[k];
      std::printf("%-28s %7.2f%% %6d/%-7d %4d/%-5d %10.3g %10.4g %9.4f %8.3f %8.3f\n", variants[k].name.c_str(),
                  100.0 * a.rate(), a.agree, a.decided(), a.near_tie_agree, a.near_ties, a.kl_sum / a.positions,
                  a.other_ppl(), a.other_ppl() / a.ref_ppl(), s.layer_bytes / s.layer_params,
                  s.vocab_bytes / s.vocab_params);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quant-study: %s\n", e.what());
    return 1;
  }
  return 0;
}
