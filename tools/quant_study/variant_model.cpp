#include "variant_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "engine/model_plan.h"
#include "engine/q8_quantizer.h"
#include "engine/weight_format.h"
#include "model/safetensors_writer.h"
#include "model/tensor_layout.h"
#include "op_args.h"

namespace qwen3::quant_study {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxExact = QN_OUT_COLS;  // exact columns per matrix

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

}  // namespace

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
      else if (t == "a8normed") v.act_normed_only = true;
      else if (t.rfind("a8bfp", 0) == 0) v.act_bfp_bits = std::stoi(t.substr(5));
      else if (t.rfind("a8fix", 0) == 0) v.act_fix_frac = std::stoi(t.substr(5));
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
      else if (t == "bpfq4" || t == "bpfq8" || t == "bpfq24") v.bpf = t.substr(3);
      else if (t == "kv16") v.bpf_kv_bits = 16;
      else throw invalid_argument("");
    } catch (const std::exception&) {
      throw invalid_argument("unknown variant part '" + t + "' in " + s + " (see the header of quant_study.cpp)");
    }
    p = e + 1;
  }
  if (v.fmt.group < 1 || v.fmt.group > 128) throw invalid_argument("group must be 1..128 in " + s);
  if (v.act_group > 4096) throw invalid_argument("activation group must be 1..4096 in " + s);
  if ((v.act_bfp_bits || v.act_fix_frac || v.act_normed_only) && v.act_group < 0)
    throw invalid_argument("a8bfp, a8fix and a8normed qualify 8-bit inputs: add a8g<G> or a8vec to " + s);
  if (v.act_bfp_bits < 0 || v.act_bfp_bits > 30) throw invalid_argument("a8bfp bits must be 1..30 in " + s);
  if (v.act_fix_frac < 0 || v.act_fix_frac > 40) throw invalid_argument("a8fix fraction bits must be 1..40 in " + s);
  if (v.bpf_kv_bits == 16 && v.bpf.empty()) throw invalid_argument("kv16 is the BPF engine's K/V: add bpfq<P> to " + s);
  if (!v.bpf.empty() && v.act_group >= 0)
    throw invalid_argument("bpf" + v.bpf + " runs the engine's own inputs: drop a8g/a8vec from " + s);
  return v;
}



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

void save_model(const ModelDir& model, const VariantWeights& vw, const std::string& dir) {
  fs::create_directories(dir);
  const ModelConfig& c = model.config();
  const auto& data = vw.data;
  // A tied model stays tied when the variant left embedding and LM head equal
  // (emb8: both the engine's q8 of the same matrix): an untied copy would cost
  // the engine a second vocabulary matrix in kernel memory.
  const auto emb = data.find("model.embed_tokens.weight"), lm = data.find("lm_head.weight");
  const bool tied = c.tie_word_embeddings && emb != data.end() && lm != data.end() && emb->second == lm->second;
  std::vector<TensorDecl> decls;
  auto layout = qwen3_tensor_layout(c, !tied);
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
  cfg["tie_word_embeddings"] = tied;
  cfg["torch_dtype"] = "float32";
  std::ofstream(dir + "/config.json") << cfg.dump(2) << "\n";
  for (const char* f : {"generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
    fs::path src = fs::path(model.path()) / f;
    if (fs::exists(src)) fs::copy_file(src, fs::path(dir) / f, fs::copy_options::overwrite_existing);
  }
}

}  // namespace qwen3::quant_study
