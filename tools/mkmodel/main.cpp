// qwen3-bpf-mkmodel OUT --preset tiny|small|0.6b|1.7b [--seed N] [--outliers]
//                   [--untied] [--tokenizer-dir DIR] [--force]
// Writes a Qwen3-architecture model directory with seeded random weights.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli_parse.h"
#include "common/error.h"
#include "model_generator.h"

namespace {

std::string default_tokenizer_dir() {
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::string(QWEN3_INSTALLED_TOKENIZER_DIR) + "/tokenizer.json", ec))
    return QWEN3_INSTALLED_TOKENIZER_DIR;
  return QWEN3_SOURCE_TOKENIZER_DIR;
}

}  // namespace

int main(int argc, char** argv) {
  qwen3::mkmodel::GeneratorOptions opt;
  opt.tokenizer_dir = default_tokenizer_dir();
  std::string out;
  bool force = false;
  CLI::App app{
      "Writes config.json, generation_config.json, model.safetensors (BF16, seeded random weights with the\n"
      "Qwen3 architecture) and the tokenizer files into OUT."};
  qwen3::cli_parse::init(app, "qwen3-bpf-mkmodel");
  app.add_option("OUT", out, "the model directory to write (new, or empty unless --force)")->required();
  app.add_option("--preset", opt.preset, "tiny | small | 0.6b | 1.7b (the generator checks the name)")->required();
  app.add_option("--seed", opt.seed, "seed of the random weights")->capture_default_str()->check(qwen3::cli_parse::non_negative_integer());
  app.add_flag("--outliers", opt.outliers, "plant a few residual channels with values in the hundreds");
  app.add_flag("--untied", opt.untied, "write a separate lm_head.weight instead of tying it to the embedding");
  app.add_option("--tokenizer-dir", opt.tokenizer_dir, "directory with tokenizer.json and tokenizer_config.json")
      ->capture_default_str();
  app.add_flag("--force", force, "write into OUT even when it already holds files (they are overwritten)");
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) return rc;

  // A model directory, a downloaded one included, is not replaced by accident.
  std::error_code ec;
  if (!force && std::filesystem::is_directory(out, ec) && !std::filesystem::is_empty(out, ec)) {
    std::fprintf(stderr, "qwen3-bpf-mkmodel: %s is not empty; refusing to overwrite it without --force\n",
                 out.c_str());
    return 1;
  }
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec)) {
    std::fprintf(stderr, "qwen3-bpf-mkmodel: %s exists and is not a directory\n", out.c_str());
    return 1;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    qwen3::mkmodel::generate_model(out, opt);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "qwen3-bpf-mkmodel: wrote %s (preset %s, seed %llu%s%s) in %.1f s\n", out.c_str(),
                 opt.preset.c_str(), static_cast<unsigned long long>(opt.seed), opt.outliers ? ", outliers" : "",
                 opt.untied ? ", untied" : "", s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3-bpf-mkmodel: %s\n", e.what());
    return 1;
  }
  return 0;
}
