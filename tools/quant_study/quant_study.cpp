// qwen3-bpf-quant-study MODEL_DIR VARIANT... [--work DIR] [--prompts N] [--length L] [--calib N] [--threads T]
//                       [--passages FILE] [--calib-passages FILE] [--against K]
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
//   a8bfp<A>     before that, each input vector requantized as the engine's block
//                floating point: Q16, one shift keeping A bits of its largest element
//   a8fix<F>     before that, every input rounded to F fraction bits: how much
//                the 8-bit codes move under a fixed-point stream's rounding
//   a8normed     8-bit inputs only for the RMSNorm outputs' matrices (QKV, gate/up, vocabulary)
//   <M>only      (qkv, o, gateup, down, embed, lmhead) quantize that matrix kind only
//   bpfq4        (bpfq8, bpfq24) run the variant's weights in the BPF engine at that
//                precision (compact K/V) instead of the float reference: e.g.
//                q4g32+gptq+mse+emb8+down8+bpfq4 is an offline-GPTQ checkpoint as
//                the daemon runs it (the q4 conversion keeps codes already on a 4-bit
//                grid, engine/q4_quantizer.h); the written model is that checkpoint
//   kv16         with bpfq<P>: the engine's int16 K/V instead of the compact one
// e.g. rtn64  noise0.1  rtn64+gptq+actcols  engine  engine+a8g32  q4g32+mse+emb8+a8g32
//
// --against K scores every variant against variant K (1-based) instead of the
// original's float reference: e.g. the engine's q4 against the float
// reference on the same 4-bit weights and 8-bit inputs,
//   qwen3-bpf-quant-study M q4g32+mse+emb8+down8+a8g32 q4g32+mse+emb8+down8+bpfq4 --against 1
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
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "activations.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "engine/bpf_backend.h"
#include "prompts.h"
#include "model/model_dir.h"
#include "quantizers.h"
#include "variant_model.h"
#include "reference/agreement.h"
#include "reference/reference_backend.h"

using namespace qwen3;
using namespace qwen3::quant_study;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::string model_dir, work = "/tmp/qwen3-quant-study", passages, calib_passages;
  std::vector<std::string> names;
  int prompts = 20, length = 52, calib = 8, threads = 2;
  int against = 0;  // > 0: variant number `against` is the baseline instead of the original's float reference
};

// The command line, or an exit code (2: usage error).
std::optional<Args> parse_args(int argc, char** argv, int& rc) {
  Args g;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    try {
      auto val = [&] {
        if (i + 1 >= argc) throw invalid_argument(a + " needs a value");
        return std::string(argv[++i]);
      };
      if (a == "--work") g.work = val();
      else if (a == "--prompts") g.prompts = std::stoi(val());
      else if (a == "--length") g.length = std::stoi(val());
      else if (a == "--calib") g.calib = std::stoi(val());
      else if (a == "--threads") g.threads = std::stoi(val());
      else if (a == "--passages") g.passages = val();
      else if (a == "--calib-passages") g.calib_passages = val();
      else if (a == "--against") g.against = std::stoi(val());
      else if (g.model_dir.empty()) g.model_dir = a;
      else g.names.push_back(a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", a.c_str(), e.what());
      rc = 2;
      return std::nullopt;
    }
  }
  if (g.model_dir.empty() || g.names.empty() || g.against < 0 || g.against > int(g.names.size())) {
    std::fprintf(stderr,
                 "usage: qwen3-bpf-quant-study MODEL_DIR VARIANT... [--work DIR] [--prompts N] [--length L] "
                 "[--calib N] [--threads T] [--passages FILE] [--calib-passages FILE] [--against K]\n");
    rc = 2;
    return std::nullopt;
  }
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines show as they come, even into a file
  int rc = 0;
  const std::optional<Args> args = parse_args(argc, argv, rc);
  if (!args) return rc;
  const auto& [model_dir, work, passages, calib_passages, names, prompts, length, calib, threads, against] = *args;
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
    std::vector<std::unique_ptr<Backend>> vrefs;
    std::vector<VariantWeights> sizes;
    for (auto& v : variants) {
      auto t0 = std::chrono::steady_clock::now();
      std::string dir = work + "/" + fs::path(model_dir).filename().string() + "-" + v.name;
      VariantWeights vw = quantize_model(*model, v, need_cal ? &cal : nullptr, pool);
      save_model(*model, vw, dir);
      vmodels.push_back(ModelDir::open(dir));
      if (!v.bpf.empty()) {  // the variant's weights in the BPF engine (compact K/V, the daemon's default)
        BpfEngineOptions o;
        o.precision = parse_precision(v.bpf);
        o.threads = threads;
        o.kv_bits = v.bpf_kv_bits;
        vrefs.push_back(make_bpf_backend(vmodels.back(), o));
      } else {
        auto ref_v = std::make_unique<ReferenceBackend>(vmodels.back(), threads);
        if (v.act_group >= 0)
          ref_v->set_matrix_input_hook(
              act8_hook({v.act_group, v.act_bfp_bits, v.act_fix_frac, v.act_normed_only}, std::move(vw.inputs)));
        vrefs.push_back(std::move(ref_v));
      }
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
    Backend& base = against > 0 ? *vrefs[size_t(against) - 1] : static_cast<Backend&>(ref);
    for (const auto& ids : eval) {
      auto kv = base.create_kv(int(ids.size()));
      ForwardResult r = base.forward(*kv, ids, w);
      for (size_t k = 0; k < variants.size(); k++) {
        auto kv2 = vrefs[k]->create_kv(int(ids.size()));
        reference::accumulate(agg[k], ids, r, vrefs[k]->forward(*kv2, ids, w));
      }
    }
    std::printf("%zu prompts, %s perplexity %.4g\n", eval.size(),
                against > 0 ? ("against " + names[size_t(against) - 1] + ":").c_str() : "float",
                agg.empty() ? 0.0 : agg[0].ref_ppl());
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
