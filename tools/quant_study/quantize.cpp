// qwen3-bpf-quantize: a model's weights rounded offline for `precision = q4`.
//   qwen3-bpf-quantize MODEL_DIR OUT_DIR (--calib-text FILE... | --calib-passages FILE | --calib-random N)
//                      [--recipe R] [--threads T] [--force]
//
// GPTQ needs each matrix's inputs on real text, which the daemon does not
// have when it loads a model, so the 4-bit rounding that meets the accuracy
// bar is done here, once: the default recipe q4g32+gptq+mse+emb8+down8
// rounds QKV, o_proj and gate/up to 4 bits per group of 32 with GPTQ and a
// searched scale, and stores down_proj, the embedding and the LM head as the
// engine's q8 (docs/numerics.md). OUT_DIR is an ordinary model directory
// (F32 weights on the 4-bit grids, config and tokenizer copied): the daemon
// loads it with `precision = q4` and keeps exactly these codes
// (engine/q4_quantizer.h); the float reference and q8 load it too.
//
// Calibration: plain text the model reads well (--calib-text, tokenized with
// the model's tokenizer, in passages of 128 tokens), or token-id passages
// (--calib-passages, the form of tools/quant_study/trained_calib.json), or
// random ids (--calib-random N: measurably worse, docs/numerics.md).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_parse.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "model/model_dir.h"
#include "prompts.h"
#include "reference/reference_backend.h"
#include "tokenizer/tokenizer.h"
#include "variant_model.h"

namespace fs = std::filesystem;
using namespace qwen3;
using namespace qwen3::quant_study;

namespace {

struct Options {
  std::string model, out, recipe = "q4g32+gptq+mse+emb8+down8", calib_passages;
  std::vector<std::string> calib_text;
  int calib_random = 0, threads = 2, passage_tokens = 128, max_passages = 32;
  bool force = false;
};

Options parse_options(int argc, char** argv) {
  Options o;
  CLI::App app{"Rounds a model's weights offline (GPTQ on calibration text) for precision = q4; "
               "the output is a model directory the daemon loads (docs/numerics.md)."};
  cli_parse::init(app, "qwen3-bpf-quantize");
  app.add_option("MODEL_DIR", o.model, "the model to quantize (safetensors + config.json)")->required();
  app.add_option("OUT_DIR", o.out, "where the quantized model goes (must not exist unless --force)")->required();
  app.add_option("--recipe", o.recipe, "quantization recipe (tools/quant_study/quant_study.cpp lists the parts)")
      ->capture_default_str();
  app.add_option("--calib-text", o.calib_text, "plain-text files to calibrate on (tokenized by the model's tokenizer)");
  app.add_option("--calib-passages", o.calib_passages, "a JSON of token-id passages ({\"prompts\": [{\"ids\": ...}]})");
  app.add_option("--calib-random", o.calib_random, "calibrate on N random-id prompts (worse than text)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--passage-tokens", o.passage_tokens, "tokens per calibration passage cut from --calib-text")
      ->capture_default_str()
      ->check(CLI::Range(16, 4096));
  app.add_option("--max-passages", o.max_passages, "at most this many passages from --calib-text")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--threads", o.threads, "worker threads")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--force", o.force, "replace OUT_DIR's model files if it exists");
  if (int rc = cli_parse::parse(app, argc, argv); rc >= 0) std::exit(rc);
  const int sources = !o.calib_text.empty() + !o.calib_passages.empty() + (o.calib_random > 0);
  if (sources != 1) cli_parse::usage_error(app, "give exactly one of --calib-text, --calib-passages, --calib-random");
  return o;
}

// Passages of `len` tokens cut from the files' text, at most `max` of them.
std::vector<std::vector<int32_t>> text_passages(const std::vector<std::string>& files, const std::string& model_dir,
                                                int len, int max) {
  auto tok = Tokenizer::load(model_dir);
  std::vector<std::vector<int32_t>> out;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) throw invalid_argument("cannot read calibration text " + f);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::vector<int32_t> ids = tok->encode(ss.str(), false);
    for (size_t at = 0; at + size_t(len) <= ids.size() && int(out.size()) < max; at += size_t(len))
      out.emplace_back(ids.begin() + long(at), ids.begin() + long(at) + len);
  }
  if (out.empty())
    throw invalid_argument("the calibration text holds no passage of " + std::to_string(len) + " tokens");
  return out;
}

std::vector<std::vector<int32_t>> calibration_prompts(const Options& o, int vocab) {
  if (!o.calib_text.empty()) return text_passages(o.calib_text, o.model, o.passage_tokens, o.max_passages);
  if (!o.calib_passages.empty()) return load_passages(o.calib_passages);
  std::mt19937_64 rng(99);
  return random_prompts(rng, o.calib_random, 52, vocab);
}

void check_out_dir(const Options& o) {
  if (fs::exists(o.out) && !fs::is_empty(o.out) && !o.force)
    throw invalid_argument(o.out + " exists and is not empty (--force replaces its model files)");
  if (fs::exists(o.out) && fs::equivalent(o.out, o.model))
    throw invalid_argument("OUT_DIR must not be the model directory itself");
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  try {
    const Variant v = parse_variant(o.recipe);
    if (!v.bpf.empty() || v.act_group >= 0 || v.noise_pct > 0)
      throw invalid_argument("recipe " + o.recipe + " has study-only parts (bpf*, a8*, noise): give weights only");
    check_out_dir(o);
    auto model = ModelDir::open(o.model);
    const auto t0 = std::chrono::steady_clock::now();
    Calibration cal;
    if (v.needs_calibration()) {
      ReferenceBackend ref(model, o.threads);
      const auto prompts = calibration_prompts(o, model->config().vocab_size);
      cal = calibrate(ref, prompts);
      std::printf("calibration: %zu passages, %.0f tokens\n", prompts.size(), cal.tokens["final_norm"]);
    }
    WorkerPool pool(o.threads);
    VariantWeights vw = quantize_model(*model, v, v.needs_calibration() ? &cal : nullptr, pool);
    save_model(*model, vw, o.out);
    std::printf("wrote %s (%s) in %.1f s; run it with precision = q4 (model_dir = %s)\n", o.out.c_str(),
                o.recipe.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                o.out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3-bpf-quantize: %s\n", e.what());
    return 1;
  }
  return 0;
}
