// Tokenizer throughput on one core: encode (first pass with an empty word
// cache, then warm passes) and decode, over the oracle corpus.
//   tokenizer_bench TOKENIZER_DIR CORPUS_JSONL [PASSES]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU time of this thread: the figure that matters on a shared, busy machine.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR CORPUS_JSONL [PASSES]\n", argv[0]);
    return 2;
  }
  const int passes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  std::vector<std::string> docs;
  {
    std::ifstream in(argv[2]);
    if (!in) {
      std::fprintf(stderr, "cannot open %s (produced by ctest -R tokenizer_oracle_generate)\n", argv[2]);
      return 1;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) docs.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
    }
  }
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  const double mb = static_cast<double>(bytes) / 1e6;

  try {
    auto start = std::chrono::steady_clock::now();
    auto tok = qwen3::Tokenizer::load(argv[1]);
    std::printf("load: %.3f s\n", seconds_since(start));
    std::printf("corpus: %zu documents, %.3f MB\n", docs.size(), mb);

    std::vector<std::vector<int32_t>> encoded(docs.size());
    size_t tokens = 0;
    for (int pass = 0; pass <= passes; ++pass) {
      start = std::chrono::steady_clock::now();
      double cpu_start = thread_cpu_seconds();
      tokens = 0;
      for (size_t i = 0; i < docs.size(); ++i) {
        encoded[i] = tok->encode(docs[i]);
        tokens += encoded[i].size();
      }
      double s = seconds_since(start);
      double cpu = thread_cpu_seconds() - cpu_start;
      std::printf("encode %s: %.3f s wall, %.2f MB/s wall, %.2f MB/s per CPU second, %.0f tokens/s\n",
                  pass == 0 ? "cold cache" : "warm cache", s, mb / s, mb / cpu, tokens / cpu);
    }
    start = std::chrono::steady_clock::now();
    double cpu_start = thread_cpu_seconds();
    size_t out_bytes = 0;
    for (int pass = 0; pass < passes; ++pass) {
      for (const auto& ids : encoded) out_bytes += tok->decode(ids).size();
    }
    double s = seconds_since(start);
    double cpu = thread_cpu_seconds() - cpu_start;
    std::printf("decode: %.2f MB/s wall, %.2f MB/s per CPU second, %.0f tokens/s\n", out_bytes / 1e6 / s,
                out_bytes / 1e6 / cpu, tokens * passes / cpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
