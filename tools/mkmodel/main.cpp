// qwen3-bpf-mkmodel OUT --preset tiny|small|0.6b [--seed N] [--outliers]
//                   [--untied] [--tokenizer-dir DIR]
// Writes a Qwen3-architecture model directory with seeded random weights.
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "model_generator.h"

namespace {

const char* kUsage =
    "usage: qwen3-bpf-mkmodel OUT --preset tiny|small|0.6b [--seed N] [--outliers] [--untied]\n"
    "                         [--tokenizer-dir DIR]\n"
    "Writes config.json, generation_config.json, model.safetensors (BF16, seeded random\n"
    "weights with the Qwen3 architecture) and the tokenizer files into OUT.\n"
    "  --outliers       plant a few residual channels with values in the hundreds\n"
    "  --untied         write a separate lm_head.weight instead of tying it to the embedding\n"
    "  --tokenizer-dir  directory with tokenizer.json and tokenizer_config.json\n";

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
  bool preset_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "qwen3-bpf-mkmodel: %s needs a value\n%s", a.c_str(), kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--preset") {
      opt.preset = value();
      preset_given = true;
    } else if (a == "--seed") {
      std::string v = value();
      char* end = nullptr;
      opt.seed = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0])) || *end) {
        std::fprintf(stderr, "qwen3-bpf-mkmodel: --seed wants a non-negative integer, got '%s'\n", v.c_str());
        return 2;
      }
    } else if (a == "--outliers") {
      opt.outliers = true;
    } else if (a == "--untied") {
      opt.untied = true;
    } else if (a == "--tokenizer-dir") {
      opt.tokenizer_dir = value();
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "qwen3-bpf-mkmodel: unknown option %s\n%s", a.c_str(), kUsage);
      return 2;
    } else if (out.empty()) {
      out = a;
    } else {
      std::fprintf(stderr, "qwen3-bpf-mkmodel: more than one output directory given\n%s", kUsage);
      return 2;
    }
  }
  if (out.empty() || !preset_given) {
    std::fputs(kUsage, stderr);
    return 2;
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
