// Runs every program of tests/verify/corpus through Pipeline::verify and checks
// the classification each <name>.json expects, that no byte of a secret file
// (or /etc/shadow) shows up in any result, and that nothing stays loaded.
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "bpf_object_census.h"
#include "verify/fixtures.h"
#include "verify/pipeline.h"
#include "verify/result_json.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace qwen3::verify;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string name;
  std::string source;
  json spec;
  FixtureFile file;  // the spec's "fixtures": a bare array, {"fixtures","maps"} or the BPF-Guardian format
  VerifyResult result;
  double seconds = 0;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string line_of(const std::string& source, int n) {
  std::stringstream ss(source);
  std::string l;
  for (int i = 1; std::getline(ss, l); ++i)
    if (i == n) return l;
  return "";
}

// Secret material that must never appear in a result: a marker file the test
// writes (world-readable, so only the sandbox keeps it from the compiler) and
// the lines of /etc/shadow and /etc/passwd.
struct Secrets {
  std::string path;
  std::vector<std::string> needles;
  Secrets() {
    std::random_device rd;
    std::ostringstream marker;
    marker << "QWEN3-VERIFY-SECRET-" << std::hex << rd() << rd() << rd();
    char tmpl[] = "/tmp/qwen3-verify-secret-XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    std::string content = "int leaked = 1; /* " + marker.str() + " */\n" + marker.str() + "\n";
    EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    fchmod(fd, 0644);
    close(fd);
    needles.push_back(marker.str());
    for (const char* f : {"/etc/shadow", "/etc/passwd"}) {
      std::stringstream ss(read_file(f));
      std::string l;
      while (std::getline(ss, l))
        if (l.size() >= 8) needles.push_back(l);
    }
  }
  ~Secrets() { unlink(path.c_str()); }
};

// One case per NAME.json; its program is NAME.c or, with "program", another case's file.
void load_cases(const Secrets& secrets, std::vector<Case>* cases) {
  for (const auto& entry : fs::directory_iterator(QWEN3_VERIFY_CORPUS_DIR)) {
    if (entry.path().extension() == ".c") {
      fs::path spec_path = entry.path();
      ASSERT_TRUE(fs::exists(spec_path.replace_extension(".json"))) << entry.path() << " has no .json";
    }
    if (entry.path().extension() != ".json") continue;
    Case c;
    c.name = entry.path().stem().string();
    // QWEN3_VERIFY_ONLY=REGEX: only the matching cases (while working on a few).
    if (const char* only = getenv("QWEN3_VERIFY_ONLY"); only && !std::regex_search(c.name, std::regex(only))) continue;
    c.spec = json::parse(read_file(entry.path()));
    const fs::path program = fs::path(QWEN3_VERIFY_CORPUS_DIR) / c.spec.value("program", c.name + ".c");
    ASSERT_TRUE(fs::exists(program)) << c.name << ": no " << program;
    c.source = read_file(program);
    c.file = parse_fixture_file(c.spec["fixtures"].dump());
    for (size_t p; (p = c.source.find("@SECRET@")) != std::string::npos;) c.source.replace(p, 8, secrets.path);
    if (c.spec.contains("pad_to_bytes")) {
      size_t target = c.spec["pad_to_bytes"].get<size_t>();
      c.source += "/*";
      while (c.source.size() + 3 < target) c.source += std::string(std::min<size_t>(79, target - c.source.size() - 3), 'x') + "\n";
      c.source += "*/\n";
    }
    cases->push_back(std::move(c));
  }
}

// Both workers of the pipeline busy, as the daemon's two verify slots are.
void run_cases(Pipeline& pipeline, std::vector<Case>& cases) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < cases.size();) {
      Case& c = cases[i];
      VerifyRequest req;
      req.source = c.source;
      req.fixtures = c.file.fixtures;
      req.initial_maps = c.file.maps;
      auto t0 = std::chrono::steady_clock::now();
      c.result = pipeline.verify(req);
      c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();

}

// A pass: every fixture passed or says why it did not run. A failure: its
// diagnosis (id, class, next action).
void check_outcome(const Case& c, const json& e) {
  const VerifyResult& r = c.result;
  if (r.decision == Decision::pass) {
    EXPECT_GT(r.verified_insns, 0u);
    EXPECT_EQ(r.fixtures.size(), c.file.fixtures.size());
    // Every fixture passed, or the kernel could not run it (and the note says why).
    bool any_ran = false;
    for (const auto& f : r.fixtures) {
      any_ran |= f.ran;
      if (f.ran) {
        EXPECT_TRUE(f.passed) << f.name << ": " << f.note;
      } else {
        EXPECT_EQ(f.note.rfind("not run: ", 0), 0u) << f.name << ": " << f.note;
      }
    }
    EXPECT_EQ(r.behaviour_checked, any_ran);
    EXPECT_EQ(r.fixtures_not_run, e.value("fixtures_not_run", 0));
    EXPECT_EQ(r.fixtures_not_checked, e.value("fixtures_not_checked", 0));
    EXPECT_TRUE(r.error_id.empty()) << r.error_id;
  } else {
    if (e.contains("fixtures_not_run")) {
      EXPECT_EQ(r.fixtures_not_run, e["fixtures_not_run"].get<int>());
    }
    if (e.contains("fixtures_not_checked")) {
      EXPECT_EQ(r.fixtures_not_checked, e["fixtures_not_checked"].get<int>());
    }
    // bpfix-style diagnosis on every failure: id, class, next action.
    EXPECT_EQ(r.error_id.rfind("BPFV-", 0), 0u) << r.error_id;
    EXPECT_FALSE(r.error_class.empty());
    EXPECT_FALSE(r.next_action.empty());
  }
}

// A verifier refusal: the line, its text and span, and the stable id of its class.
void check_verifier_refusal(const Case& c, const json& e) {
  const VerifyResult& r = c.result;
  EXPECT_FALSE(r.verifier_message.empty());
  EXPECT_FALSE(r.verifier_log_excerpt.empty());
  if (e.contains("line")) {
    EXPECT_EQ(r.verifier_line, e["line"].get<int>()) << r.verifier_log_excerpt;
    EXPECT_EQ(trim(r.verifier_source_line), trim(line_of(c.source, e["line"].get<int>())));
    // The span of the instruction that lost the proof: that line, its text, real columns.
    EXPECT_EQ(r.span_line, e["line"].get<int>());
    EXPECT_EQ(r.span_text, line_of(c.source, e["line"].get<int>()));
    EXPECT_GT(r.span_column_start, 0);
    EXPECT_GT(r.span_column_end, r.span_column_start);
    if (e.contains("span") && r.span_column_start > 0) {
      EXPECT_EQ(r.span_text.substr(static_cast<size_t>(r.span_column_start - 1),
                                   static_cast<size_t>(r.span_column_end - r.span_column_start)),
                e["span"].get<std::string>());
    }
  }
  // Stable ids per class; refusals of kernel-memory readers are security_policy.
  static const std::map<std::string, std::string> ids = {
      {"packet_bounds", "BPFV-VER-PKT-BOUNDS"},  {"null_check_missing", "BPFV-VER-NULL"},
      {"uninitialized", "BPFV-VER-UNINIT"},      {"unbounded_loop", "BPFV-VER-LOOP"},
      {"invalid_helper_argument", "BPFV-VER-HELPER-ARG"}, {"invalid_context_access", "BPFV-VER-CTX"}};
  const std::string cls = e["class"].get<std::string>();
  if (ids.count(cls)) {
    EXPECT_EQ(r.error_id, ids.at(cls));
    EXPECT_EQ(r.error_class, cls);
  } else if (c.name.rfind("verifier_sec_", 0) == 0) {
    EXPECT_EQ(r.error_id.rfind("BPFV-SEC-", 0), 0u) << r.error_id;
    EXPECT_EQ(r.error_class, "security_policy");
  }
}

// Everything one case's spec expects of its result, and no secret in it.
void check_case(const Case& c, const PipelineOptions& options, const Secrets& secrets) {
  const json& e = c.spec["expect"];
  const VerifyResult& r = c.result;
  EXPECT_EQ(to_string(r.decision), e["decision"].get<std::string>());
  EXPECT_EQ(to_string(r.first_failed_stage), e["stage"].get<std::string>());
  EXPECT_EQ(to_string(r.verifier_class), e["class"].get<std::string>());
  EXPECT_FALSE(r.summary.empty());
  if (e.contains("summary_contains")) {
    EXPECT_NE(r.summary.find(e["summary_contains"].get<std::string>()), std::string::npos);
  }
  if (e.contains("behaviour_checked")) {
    EXPECT_EQ(r.behaviour_checked, e["behaviour_checked"].get<bool>());
  }

  check_outcome(c, e);
  // Nothing the validator asked for is passed silently.
  int unchecked = 0;
  for (const auto& f : r.fixtures)
    if (!f.not_checked.empty()) {
      ++unchecked;
      EXPECT_NE(f.not_checked.find("not checked: no expected value given"), std::string::npos) << f.name;
    }
  EXPECT_EQ(unchecked, r.fixtures_not_checked);
  if (r.fixtures_not_run > 0 && r.decision == Decision::pass) {
    EXPECT_NE(r.summary.find("not run"), std::string::npos);
  }
  if (r.fixtures_not_checked > 0) {
    EXPECT_NE(r.summary.find("not checked"), std::string::npos);
  }
  if (r.first_failed_stage == Stage::policy || r.first_failed_stage == Stage::compile) {
    EXPECT_FALSE(r.compiler_diagnostics.empty());
  }
  // Whatever got as far as the compiler says how it was confined.
  if (r.first_failed_stage == Stage::compile || r.first_failed_stage == Stage::verify || r.decision == Decision::pass) {
    const std::string mode = options.compiler_sandbox == "landlock" ? "landlock" : "namespaces";
    EXPECT_EQ(r.compile_sandbox.rfind(options.compiler_sandbox == "auto" ? "" : mode, 0), 0u) << r.compile_sandbox;
    EXPECT_FALSE(r.compile_sandbox.empty());
  } else if (r.first_failed_stage == Stage::policy && r.summary.find("clang reports") == std::string::npos) {
    EXPECT_TRUE(r.compile_sandbox.empty());
  }
  if (e["stage"] == "compile" && e.contains("line")) {
    int first_error_line = 0;
    for (const auto& d : r.compiler_diagnostics)
      if (d.text.rfind("error", 0) == 0 || d.text.rfind("fatal", 0) == 0) {
        first_error_line = d.line;
        break;
      }
    EXPECT_EQ(first_error_line, e["line"].get<int>());
  }
  if (e["stage"] == "verify") check_verifier_refusal(c, e);
  if (e.contains("failing_fixtures")) {
    std::set<std::string> failing, expected;
    for (const auto& f : r.fixtures)
      if (!f.passed) failing.insert(f.name);
    for (const auto& n : e["failing_fixtures"]) expected.insert(n.get<std::string>());
    EXPECT_EQ(failing, expected);
    for (const auto& f : r.fixtures) {
      EXPECT_FALSE(f.got_action.empty());
      if (!f.passed) {
        EXPECT_FALSE(f.note.empty());
      }
    }
  }
  const std::string text = to_json_text(r);
  // QWEN3_VERIFY_DUMP=DIR keeps every result's JSON for reading.
  if (const char* dump = getenv("QWEN3_VERIFY_DUMP")) std::ofstream(fs::path(dump) / (c.name + ".result.json")) << to_json_text(r, 1);
  for (const auto& needle : secrets.needles)
    EXPECT_EQ(text.find(needle), std::string::npos) << "secret material leaked into the result";
}

// Nothing stays loaded: every program and map the pipeline created is gone.
void expect_nothing_left(const qwen3::verify::testing::BpfCensus& census_before) {
  // (Other tests may load their own objects meanwhile; only XDP programs and
  // maps named like the corpus's count as ours.)
  const std::set<std::string> our_maps = {"ethertype_count", "ethertype_counts", "counters", "verdicts", "bytes",
                                          "table", "flows", "pinned", "tx_port", "events", "lengths"};
  std::vector<std::string> leaked;
  for (int attempt = 0; attempt < 30; ++attempt) {
    leaked.clear();
    const auto after = qwen3::verify::testing::take_bpf_census();
    for (const auto& [id, info] : after.programs)
      if (!census_before.programs.count(id) && info.type == BPF_PROG_TYPE_XDP)
        leaked.push_back("program " + std::to_string(id) + " " + info.name);
    for (const auto& [id, info] : after.maps)
      if (!census_before.maps.count(id) && (our_maps.count(info.name) || info.name.rfind("prog.", 0) == 0))
        leaked.push_back("map " + std::to_string(id) + " " + info.name);
    if (leaked.empty()) {
      std::cout << "bpf objects: programs " << census_before.programs.size() << " -> " << after.programs.size()
                << ", maps " << census_before.maps.size() << " -> " << after.maps.size() << "\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(leaked.empty()) << "left loaded: " << leaked.front();
}

void print_timings(const std::vector<Case>& cases, const std::map<std::string, int>& per_stage) {
  double total = 0;
  for (const Case& c : cases) total += c.seconds;
  std::cout << cases.size() << " programs, " << total << " s of pipeline time;";
  for (const auto& [k, n] : per_stage) std::cout << " " << k << "=" << n;
  std::cout << "\n";
  std::vector<const Case*> by_time;
  for (const Case& c : cases) by_time.push_back(&c);
  std::sort(by_time.begin(), by_time.end(), [](const Case* x, const Case* y) { return x->seconds > y->seconds; });
  std::cout << "slowest:";
  for (size_t i = 0; i < 6 && i < by_time.size(); ++i) std::cout << " " << by_time[i]->name << "=" << by_time[i]->seconds << "s";
  std::cout << "; median " << by_time[by_time.size() / 2]->seconds << "s\n";
}

}  // namespace

TEST(VerifyCorpus, ClassifiesEveryProgramAsExpectedAndLeavesNothingBehind) {
  ASSERT_EQ(geteuid(), 0u) << "the verification pipeline needs root (CAP_BPF, CAP_SYS_ADMIN for the sandbox)";
  Secrets secrets;
  std::vector<Case> cases;
  load_cases(secrets, &cases);
  if (HasFatalFailure()) return;
  if (!getenv("QWEN3_VERIFY_ONLY")) {
    ASSERT_GE(cases.size(), 40u) << "the corpus must hold at least 40 programs";
  }

  PipelineOptions options;
  options.data_dir = QWEN3_VERIFY_TEST_DATA_DIR;
  options.compile_timeout_ms = 4000;  // the compile bomb must hit it; normal programs take ~0.1 s
  options.max_concurrent = 2;
  if (const char* mode = getenv("QWEN3_VERIFY_SANDBOX")) options.compiler_sandbox = mode;
  std::cout << "compiler sandbox: " << options.compiler_sandbox << "\n";
  Pipeline pipeline(options);
  // "options": {"minimal_loader_capabilities": true} in a case is what every
  // case gets now: the loader never keeps CAP_PERFMON.
  const auto census_before = qwen3::verify::testing::take_bpf_census();
  run_cases(pipeline, cases);

  std::map<std::string, int> per_stage;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.result.summary);
    per_stage[std::string(to_string(c.result.decision)) + "/" + to_string(c.result.first_failed_stage)]++;
    check_case(c, options, secrets);
  }
  expect_nothing_left(census_before);
  print_timings(cases, per_stage);
}
