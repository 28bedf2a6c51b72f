// Prints how long the pipeline's parts take on this machine (not a test):
//   verify_bench [corpus_dir] [repeats]
// compile alone in each sandbox mode, and whole Pipeline::verify runs of the
// corpus's passing programs (with their fixtures), one at a time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "verify/fixtures.h"
#include "verify/include_tree.h"
#include "verify/pipeline.h"
#include "verify/sandbox_compiler.h"

namespace fs = std::filesystem;
using namespace qwen3::verify;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void report(const char* what, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  std::printf("%-34s n=%-4zu mean %8.1f ms  median %8.1f ms  min %8.1f ms  max %8.1f ms\n", what, ms.size(),
              sum / static_cast<double>(ms.size()), ms[ms.size() / 2], ms.front(), ms.back());
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path corpus = argc > 1 ? argv[1] : QWEN3_VERIFY_CORPUS_DIR;
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  struct Program {
    std::string name, source;
    std::vector<Fixture> fixtures;
    std::vector<MapEntry> maps;
  };
  std::vector<Program> programs;
  for (const auto& e : fs::directory_iterator(corpus)) {
    if (e.path().extension() != ".c") continue;
    fs::path spec_path = e.path();
    spec_path.replace_extension(".json");
    auto spec = nlohmann::json::parse(read_file(spec_path));
    if (spec["expect"]["decision"] != "pass") continue;
    FixtureFile file = parse_fixture_file(spec["fixtures"].dump());
    programs.push_back({e.path().stem().string(), read_file(e.path()), file.fixtures, file.maps});
  }
  std::sort(programs.begin(), programs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::printf("%zu passing corpus programs, %d repeats\n", programs.size(), repeats);

  PipelineOptions options;
  options.data_dir = QWEN3_VERIFY_TEST_DATA_DIR;
  SandboxConfig sc;
  sc.include_dir = prepare_include_tree(options.data_dir);
  for (SandboxMode mode : {SandboxMode::namespaces, SandboxMode::landlock}) {
    sc.mode = mode;
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r)
      for (const auto& p : programs) {
        auto out = compile_in_sandbox(p.source, sc);
        if (out.status != CompileStatus::ok) {
          std::printf("%s: %s\n", p.name.c_str(), out.message.c_str());
          return 1;
        }
        ms.push_back(out.seconds * 1000);
      }
    report(mode == SandboxMode::namespaces ? "compile (namespaces sandbox)" : "compile (landlock sandbox)", ms);
  }
  Pipeline pipeline(options);
  std::vector<double> ms;
  size_t fixtures = 0;
  for (int r = 0; r < repeats; ++r)
    for (const auto& p : programs) {
      auto t0 = Clock::now();
      auto res = pipeline.verify({p.source, p.fixtures, p.maps});
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      fixtures += p.fixtures.size();
      if (res.decision != Decision::pass) {
        std::printf("%s: %s\n", p.name.c_str(), res.summary.c_str());
        return 1;
      }
    }
  report("Pipeline::verify (all 4 stages)", ms);
  std::printf("fixtures run: %zu\n", fixtures);
  return 0;
}
