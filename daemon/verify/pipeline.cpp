#include "verify/pipeline.h"

#include "verify/repair_candidates.h"

#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "verify/bpf_loader.h"
#include "verify/diagnosis.h"
#include "verify/fixtures.h"
#include "verify/include_tree.h"
#include "verify/policy.h"
#include "verify/proof_trace.h"
#include "verify/repair_candidates.h"
#include "verify/sandbox_compiler.h"
#include "verify/verifier_log.h"

namespace qwen3::verify {

using Clock = std::chrono::steady_clock;

// Shared between copies of a Pipeline: the concurrency slots and the include tree.
struct PipelineState {
  std::mutex mutex;
  std::condition_variable freed;
  int running = 0;
  std::string include_dir;  // prepared lazily on first compile
};

namespace {

constexpr const char* kMainFile = "/src/prog.c";  // the program's path inside the compiler sandbox

class Slot {
 public:
  Slot(PipelineState& s, int limit, Clock::time_point deadline) : s_(s) {
    std::unique_lock lock(s_.mutex);
    acquired_ = s_.freed.wait_until(lock, deadline, [&] { return s_.running < std::max(1, limit); });
    if (acquired_) ++s_.running;
  }
  ~Slot() {
    if (!acquired_) return;
    std::lock_guard lock(s_.mutex);
    --s_.running;
    s_.freed.notify_one();
  }
  bool acquired() const { return acquired_; }

 private:
  PipelineState& s_;
  bool acquired_ = false;
};

std::string source_line(const std::string& source, int line) {
  std::string l = source_line_text(source, line);
  return l.size() > 400 ? l.substr(0, 400) + "..." : l;
}

// libbpf's own explanation, without the verifier log it may have echoed.
std::string libbpf_gist(const std::string& messages) {
  std::stringstream ss(messages);
  std::string line, out;
  bool in_log = false;
  while (std::getline(ss, line)) {
    if (line.find("-- BEGIN PROG LOAD LOG --") != std::string::npos) in_log = true;
    if (!in_log && !line.empty()) out += line + "\n";
    if (line.find("-- END PROG LOAD LOG --") != std::string::npos) in_log = false;
  }
  if (out.size() > 2000) out = out.substr(0, 2000) + "...\n";
  return out;
}

VerifyResult fail(VerifyResult r, Decision d, Stage s, std::string summary) {
  r.decision = d;
  r.first_failed_stage = s;
  r.summary = std::move(summary);
  return r;
}

// A fixture after input validation: either ready to run, or with the reason it cannot run.
struct PreparedFixture {
  std::string packet;
  std::string expected_packet;
  uint32_t expected_action = 0;
  std::vector<MapWrite> expected_maps;  // map, key bytes, expected value bytes
  std::string problem;
};

// Decodes a map entry's hex; "" or what is wrong.
std::string decode_map_entry(const MapEntry& m, const std::string& where, MapWrite* out) {
  std::string err;
  auto key = decode_hex(m.key_hex, &err);
  if (!key) return where + ": key_hex is malformed: " + err;
  auto value = decode_hex(m.value_hex, &err);
  if (!value) return where + ": value_hex is malformed: " + err;
  *out = {m.map, *key, *value};
  return "";
}

PreparedFixture prepare_fixture(const Fixture& f, const PipelineOptions& opt) {
  PreparedFixture p;
  std::string err;
  auto action = parse_xdp_action(f.expected_action);
  if (!action) {
    p.problem = "expected_action \"" + f.expected_action +
                "\" is not one of XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT";
    return p;
  }
  p.expected_action = *action;
  auto packet = decode_hex(f.packet_hex, &err);
  if (!packet) {
    p.problem = "packet_hex is malformed: " + err;
    return p;
  }
  if (packet->size() > opt.max_packet_bytes) {
    p.problem = "packet is " + std::to_string(packet->size()) + " bytes; the limit is " +
                std::to_string(opt.max_packet_bytes);
    return p;
  }
  p.packet = *packet;
  if (!f.expected_packet_hex.empty()) {
    auto expected = decode_hex(f.expected_packet_hex, &err);
    if (!expected) {
      p.problem = "expected_packet_hex is malformed: " + err;
      return p;
    }
    p.expected_packet = *expected;
  }
  for (size_t i = 0; i < f.expected_maps.size(); ++i) {
    MapWrite w;
    if (std::string why = decode_map_entry(f.expected_maps[i], "expected_maps[" + std::to_string(i) + "]", &w);
        !why.empty()) {
      p.problem = why;
      return p;
    }
    p.expected_maps.push_back(std::move(w));
  }
  return p;
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Pipeline::Pipeline(PipelineOptions options) : options_(std::move(options)), state_(std::make_shared<PipelineState>()) {}

VerifyResult Pipeline::verify(const VerifyRequest& request) const {
  // Problems with the input are results; anything thrown here is ours.
  VerifyResult r;
  try {
    r = verify_stages(request);
  } catch (const std::exception& e) {
    r = fail(VerifyResult{}, Decision::error, Stage::infrastructure, std::string("infrastructure: ") + e.what());
  }
  diagnose(r, request.source);
  r.fixits = proposed_fixits(request.source, r);
  return r;
}

namespace {

using Outcome = std::optional<VerifyResult>;  // a finished (failed) result, or nullopt: go on

// Stage 1: policy (cheap, before queueing), and the fixture count.
Outcome policy_stage(VerifyResult& r, const VerifyRequest& request, const PipelineOptions& options) {
  PolicyLimits limits;
  limits.max_source_bytes = options.max_source_bytes;
  std::vector<Diagnostic> violations = check_policy(request.source, limits);
  if (!violations.empty()) {
    std::string summary = "policy: " + violations.front().text;
    if (violations.front().line > 0) summary = "policy: line " + std::to_string(violations.front().line) + ": " + violations.front().text;
    if (violations.size() > 1) summary += " (and " + std::to_string(violations.size() - 1) + " more)";
    r.compiler_diagnostics = std::move(violations);
    return fail(std::move(r), Decision::fail, Stage::policy, summary);
  }
  if (static_cast<int>(request.fixtures.size()) > options.max_fixtures)
    return fail(std::move(r), Decision::error, Stage::behaviour,
                "behaviour: " + std::to_string(request.fixtures.size()) + " fixtures; the limit is " +
                    std::to_string(options.max_fixtures));
  return std::nullopt;
}

// The sandbox mode named by the options, or an error text.
std::optional<SandboxMode> sandbox_mode(const std::string& name, std::string& error) {
  if (name == "namespaces") return SandboxMode::namespaces;
  if (name == "landlock") return SandboxMode::landlock;
  if (name == "auto" || name.empty()) return SandboxMode::automatic;
  error = "infrastructure: unknown compiler_sandbox \"" + name + "\" (use auto, namespaces or landlock)";
  return std::nullopt;
}

// Stage 2's outcome as a result: a compile that did not produce an object.
Outcome compile_failure(VerifyResult& r, const CompileOutcome& compiled) {
  r.compile_sandbox = compiled.sandbox;
  r.compiler_diagnostics = compiled.parsed;
  if (compiled.status == CompileStatus::infrastructure)
    return fail(std::move(r), Decision::error, Stage::infrastructure, "infrastructure: " + compiled.message);
  if (compiled.status == CompileStatus::forbidden_input) {
    // The policy's reading of the source missed something clang did read.
    Diagnostic d;
    d.text = compiled.message;
    d.stage_message = "policy: " + compiled.message;
    r.compiler_diagnostics.insert(r.compiler_diagnostics.begin(), d);
    return fail(std::move(r), Decision::fail, Stage::policy, "policy: " + compiled.message);
  }
  if (compiled.status != CompileStatus::ok) {
    if (compiled.status == CompileStatus::limit_exceeded) {
      Diagnostic d;
      d.stage_message = compiled.message;
      d.text = compiled.message;
      r.compiler_diagnostics.insert(r.compiler_diagnostics.begin(), d);
    }
    return fail(std::move(r), Decision::fail, Stage::compile, "compile: " + compiled.message);
  }
  return std::nullopt;
}

// The fixtures as the loader runs them: usable ones become packets, run_index maps each fixture to
// its packet (-1: unusable, not sent).
struct PreparedRun {
  std::vector<PreparedFixture> prepared;
  std::vector<PacketInput> packets;
  std::vector<int> run_index;
};

PreparedRun prepare_run(const VerifyRequest& request, const PipelineOptions& options) {
  PreparedRun pr;
  for (const auto& f : request.fixtures) {
    pr.prepared.push_back(prepare_fixture(f, options));
    if (pr.prepared.back().problem.empty()) {
      pr.run_index.push_back(static_cast<int>(pr.packets.size()));
      PacketInput in{f.name, pr.prepared.back().packet, {}};
      for (const auto& m : pr.prepared.back().expected_maps) in.read_maps.push_back({m.map, m.key});
      pr.packets.push_back(std::move(in));
    } else {
      pr.run_index.push_back(-1);
    }
  }
  return pr;
}

// A program the loader refused by its own checks (allowlist, loop budget, map memory).
VerifyResult loader_refusal(VerifyResult r, const VerifyRequest& request, const std::string& object,
                            const LoadReport& load) {
  r.verifier_class = VerifierClass::other;
  r.verifier_message = load.reject_reason;
  r.verifier_log_excerpt = load.reject_reason + "\n" + libbpf_gist(load.libbpf_messages);
  r.loop_iteration_bound = load.loop_iterations;
  r.run_work_bound = load.run_work;
  r.verified_insns = load.verified_insns;
  // A loop over budget: the line of its outermost loop construct.
  if (load.loop_insn >= 0) {
    if (SourcePosition pos = btf_line_info_position(object, load.loop_insn); pos.line > 0) {
      r.verifier_line = pos.line;
      r.verifier_column = pos.column;
      r.verifier_insn = load.loop_insn;
      r.verifier_source_line = source_line(request.source, pos.line);
      return fail(std::move(r), Decision::fail, Stage::verify,
                  "verify: line " + std::to_string(pos.line) + ": " + load.reject_reason);
    }
  }
  // A refused helper is found by instruction, which carries no line here:
  // point at the source line that names it.
  static const std::regex refused_call(R"((?:calls the kfunc|declares the kernel variable|calls) (\w+))");
  std::smatch m;
  if (std::regex_search(load.reject_reason, m, refused_call)) {
    if (int line = first_line_naming(request.source, m[1]); line > 0) {
      r.verifier_line = line;
      r.verifier_source_line = source_line(request.source, line);
      return fail(std::move(r), Decision::fail, Stage::verify,
                  "verify: line " + std::to_string(line) + ": " + load.reject_reason);
    }
  }
  return fail(std::move(r), Decision::fail, Stage::verify, "verify: " + load.reject_reason);
}

// A program the kernel's verifier (or libbpf before it) refused.
VerifyResult verifier_rejection(VerifyResult r, const VerifyRequest& request, const std::string& object,
                                const LoadReport& load) {
  const std::string& log = load.log_level2.empty() ? load.log_level1 : load.log_level2;
  VerifierAnalysis a = analyze_verifier_log(log, kMainFile);
  if (a.message.empty() && a.insn < 0) {
    // Refused before the verifier said anything (BTF, map creation, relocations): libbpf knows why.
    std::string gist = libbpf_gist(load.libbpf_messages);
    r.verifier_class = VerifierClass::other;
    r.verifier_message = gist.empty() ? "load failed: " + std::string(strerror(load.load_errno)) : gist;
    r.verifier_log_excerpt = log.empty() ? gist : a.excerpt;
    return fail(std::move(r), Decision::fail, Stage::verify,
                "verify: the kernel refused the program before verification: " + first_line(r.verifier_message));
  }
  r.verifier_class = a.verifier_class;
  r.verifier_message = a.message;
  r.verifier_log_excerpt = a.excerpt;
  r.verifier_line = a.line;
  r.verifier_insn = a.insn;
  // The column of that instruction, from the object's own line info.
  if (SourcePosition pos = btf_line_info_position(object, a.insn); pos.line == a.line && a.line > 0)
    r.verifier_column = pos.column;
  r.verifier_source_line = a.line > 0 ? source_line(request.source, a.line) : a.annotation;
  r.verified_insns = a.processed_insns;
  const ProofTrace proof = trace_lost_proof(log, kMainFile, a.line, a.verifier_class, a.message);
  r.proof_line = proof.line;
  r.proof_source_line = proof.line > 0 ? source_line(request.source, proof.line) : "";
  r.proof_note = proof.note;
  r.required_proof = proof.required;
  std::string where = a.line > 0 ? " at line " + std::to_string(a.line) : "";
  return fail(std::move(r), Decision::fail, Stage::verify,
              std::string("verify: rejected (") + to_string(a.verifier_class) + ")" + where + ": " +
                  first_line(a.message));
}

// Stage 3's outcome: the load through the verifier.
Outcome load_failure(VerifyResult& r, const VerifyRequest& request, const std::string& object,
                     const LoadReport& load) {
  if (!load.finished)
    return fail(std::move(r), Decision::error, Stage::infrastructure, "infrastructure: " + load.child_failure);
  if (load.infrastructure)
    return fail(std::move(r), Decision::error, Stage::infrastructure, "infrastructure: " + load.reject_reason);
  if (!load.reject_reason.empty()) return loader_refusal(std::move(r), request, object, load);
  if (!load.loaded) return verifier_rejection(std::move(r), request, object, load);
  return std::nullopt;
}

// The expected map entries of one fixture against what the run left; notes say what differs.
bool maps_as_expected(const PreparedFixture& p, const PacketRun& run, std::vector<std::string>& notes) {
  bool ok = true;
  for (size_t m = 0; m < p.expected_maps.size(); ++m) {
    const MapWrite& want = p.expected_maps[m];
    const std::string what = "map " + want.map + "[" + encode_hex(want.key) + "]";
    const std::string err = m < run.map_errors.size() ? run.map_errors[m] : "not read";
    if (!err.empty()) {
      ok = false;
      notes.push_back(what + ": " + err);
      continue;
    }
    std::string expected = want.value;
    const std::string& got = run.map_values[m];
    if (expected.size() < got.size()) expected.resize(got.size(), '\0');  // value_u32 against wider values
    if (got != expected) {
      ok = false;
      notes.push_back(what + " is " + encode_hex(got) + ", expected " + encode_hex(expected));
    }
  }
  return ok;
}

// One fixture that ran: action, output bytes and map state against its expectations.
void judge_run(const Fixture& f, const PreparedFixture& p, const PacketRun& run, FixtureResult& fr) {
  fr.ran = true;
  fr.run_ns = run.run_ns;
  fr.cpu_ns = run.cpu_ns;
  fr.got_action = xdp_action_name(run.retval);
  fr.got_packet_hex = encode_hex(run.output);
  std::vector<std::string> notes, unchecked;
  const bool action_ok = run.retval == p.expected_action;
  if (!action_ok) notes.push_back("expected " + fr.expected_action + ", got " + fr.got_action);
  bool packet_ok = true;
  if (!f.expected_packet_hex.empty()) {
    packet_ok = run.output == p.expected_packet;
    if (!packet_ok) {
      size_t diff = 0;
      while (diff < run.output.size() && diff < p.expected_packet.size() && run.output[diff] == p.expected_packet[diff]) ++diff;
      notes.push_back("output packet differs from expected_packet_hex at byte " + std::to_string(diff) + " (got " +
                      std::to_string(run.output.size()) + " bytes, expected " +
                      std::to_string(p.expected_packet.size()) + ")");
    }
  } else if (f.validator == "packet_bytes") {
    unchecked.push_back("output bytes: not checked: no expected value given");
  }
  const bool maps_ok = maps_as_expected(p, run, notes);
  if (p.expected_maps.empty() && f.validator == "map_state")
    unchecked.push_back("map state: not checked: no expected value given");
  fr.passed = action_ok && packet_ok && maps_ok;
  for (const auto& u : unchecked) fr.not_checked += (fr.not_checked.empty() ? "" : "; ") + u;
  for (const auto& n : notes) fr.note += (fr.note.empty() ? "" : "; ") + n;
  if (fr.passed && !fr.not_checked.empty()) fr.note = fr.not_checked;
}

// A fixture the kernel would not run: reported, counted, never a failure of the program.
void note_not_run(const PreparedFixture& p, const PacketRun* run, FixtureResult& fr) {
  fr.got_action = "NOT_RUN";
  if (run && p.packet.size() < 14 && run->error_errno == EINVAL)
    fr.note = "not run: the frame is " + std::to_string(p.packet.size()) +
              " bytes, shorter than an Ethernet header (14): the kernel refuses XDP test runs on it "
              "(BPF_PROG_TEST_RUN: EINVAL), as real NICs never hand such runt frames to XDP";
  else
    fr.note = "not run: " + (run ? run->error : std::string("the loader did not run this fixture"));
}

struct BehaviourCounts {
  int failed = 0, unusable = 0, not_run = 0, not_checked = 0;
  std::string failures, first_not_run;
};

BehaviourCounts judge_fixtures(VerifyResult& r, const VerifyRequest& request, const PreparedRun& pr,
                               const LoadReport& load) {
  BehaviourCounts c;
  for (size_t i = 0; i < request.fixtures.size(); ++i) {
    const Fixture& f = request.fixtures[i];
    const PreparedFixture& p = pr.prepared[i];
    FixtureResult fr;
    fr.name = f.name;
    fr.expected_action = p.problem.empty() ? xdp_action_name(p.expected_action) : f.expected_action;
    fr.expected_packet_hex = p.problem.empty() ? encode_hex(p.expected_packet) : f.expected_packet_hex;
    const int index = pr.run_index[i];
    const PacketRun* run = index >= 0 && index < static_cast<int>(load.runs.size()) ? &load.runs[size_t(index)] : nullptr;
    if (!p.problem.empty()) {
      // The fixture itself is unusable (malformed hex, unknown action, too big).
      fr.note = p.problem;
      fr.got_action = "NOT_RUN";
      ++c.unusable;
    } else if (!run || !run->ran) {
      note_not_run(p, run, fr);
      if (c.first_not_run.empty()) c.first_not_run = fr.name + ": " + fr.note;
      ++c.not_run;
    } else {
      judge_run(f, p, *run, fr);
      if (!fr.not_checked.empty()) ++c.not_checked;
      if (!fr.passed && ++c.failed <= 3) c.failures += (c.failures.empty() ? "" : "; ") + f.name + ": " + fr.note;
    }
    r.fixtures.push_back(std::move(fr));
  }
  return c;
}

// Stage 4's verdict from the counts; what was not run or not checked is said in every summary.
VerifyResult behaviour_verdict(VerifyResult r, const VerifyRequest& request, const BehaviourCounts& c) {
  const int total = static_cast<int>(request.fixtures.size());
  const int ran = total - c.unusable - c.not_run;
  r.fixtures_not_run = c.not_run + c.unusable;
  r.fixtures_not_checked = c.not_checked;
  r.behaviour_checked = ran > 0;
  std::string caveats;
  if (c.not_run > 0)
    caveats += "; " + plural(c.not_run, "fixture", "fixtures") + " not run (" + c.first_not_run + ")";
  if (c.not_checked > 0)
    caveats += "; " + plural(c.not_checked, "fixture", "fixtures") +
               " with expectations not checked (no expected value given)";
  const std::string verified = "compiled, verified (" + std::to_string(r.verified_insns) + " insns)";
  if (c.failed > 0)
    return fail(std::move(r), Decision::fail, Stage::behaviour,
                "behaviour: " + std::to_string(c.failed) + " of " + std::to_string(ran) + " fixtures run failed: " +
                    c.failures + caveats);
  if (c.unusable > 0) {
    std::string first;
    for (const auto& fr : r.fixtures)
      if (fr.got_action == "NOT_RUN" && fr.note.rfind("not run:", 0) != 0) {
        first = fr.name + ": " + fr.note;
        break;
      }
    return fail(std::move(r), Decision::error, Stage::behaviour,
                "behaviour: " + std::to_string(c.unusable) + " of " + std::to_string(total) +
                    " fixtures are unusable (" + first + ")" + caveats);
  }
  if (total > 0 && ran == 0)
    return fail(std::move(r), Decision::error, Stage::behaviour,
                "behaviour: none of the " + std::to_string(total) + " fixtures could be run, so behaviour is NOT checked" +
                    caveats);
  r.decision = Decision::pass;
  r.first_failed_stage = Stage::none;
  if (request.fixtures.empty())
    r.summary = "pass: " + verified + "; behaviour NOT checked (no fixtures given)";
  else if (c.not_run > 0)
    r.summary = "pass: " + verified + "; all " + std::to_string(ran) + " runnable fixtures behaved as expected" + caveats;
  else
    r.summary = "pass: " + verified + "; all " + std::to_string(total) + " fixtures behaved as expected" + caveats;
  return r;
}

}  // namespace

VerifyResult Pipeline::verify_stages(const VerifyRequest& request) const {
  VerifyResult r;
  const auto start = Clock::now();
  const auto deadline = options_.request_timeout_ms > 0
                            ? start + std::chrono::milliseconds(options_.request_timeout_ms)
                            : Clock::time_point::max();
  auto remaining_ms = [&](int cap) {
    if (deadline == Clock::time_point::max()) return cap;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<long long>(0, std::min<long long>(cap, left)));
  };

  if (Outcome done = policy_stage(r, request, options_)) return *done;
  Slot slot(*state_, options_.max_concurrent, deadline);
  if (!slot.acquired())
    return fail(std::move(r), Decision::error, Stage::infrastructure,
                "infrastructure: the verification service is busy (" + std::to_string(options_.max_concurrent) +
                    " running) and the request's time limit of " + std::to_string(options_.request_timeout_ms) +
                    " ms passed while queued");

  // Stage 2: compile in the sandbox.
  std::string include_dir;
  try {
    std::lock_guard lock(state_->mutex);
    if (state_->include_dir.empty()) state_->include_dir = prepare_include_tree(options_.data_dir);
    include_dir = state_->include_dir;
  } catch (const std::exception& e) {
    return fail(std::move(r), Decision::error, Stage::infrastructure, std::string("infrastructure: ") + e.what());
  }
  SandboxConfig sc;
  std::string mode_error;
  std::optional<SandboxMode> mode = sandbox_mode(options_.compiler_sandbox, mode_error);
  if (!mode) return fail(std::move(r), Decision::error, Stage::infrastructure, mode_error);
  sc.mode = *mode;
  sc.clang = options_.clang;
  sc.include_dir = include_dir;
  sc.work_dir = options_.work_dir;
  sc.timeout_ms = remaining_ms(options_.compile_timeout_ms);
  sc.memory_bytes = options_.compile_memory_bytes;
  sc.max_object_bytes = options_.max_object_bytes;
  if (sc.timeout_ms <= 0)
    return fail(std::move(r), Decision::error, Stage::infrastructure, "infrastructure: request time limit reached before compiling");
  const CompileOutcome compiled = compile_in_sandbox(request.source, sc);
  if (Outcome done = compile_failure(r, compiled)) return *done;

  // Stage 3 (+4): load through the verifier and run the fixtures, in one child process.
  const PreparedRun pr = prepare_run(request, options_);
  std::vector<MapWrite> initial;
  for (size_t i = 0; i < request.initial_maps.size(); ++i) {
    MapWrite w;
    if (std::string why = decode_map_entry(request.initial_maps[i], "maps[" + std::to_string(i) + "]", &w); !why.empty())
      return fail(std::move(r), Decision::error, Stage::behaviour, "behaviour: initial map contents: " + why);
    initial.push_back(std::move(w));
  }
  LoaderConfig lc;
  lc.timeout_ms = remaining_ms(options_.verify_timeout_ms);
  lc.max_map_bytes = options_.max_map_bytes;
  lc.max_loop_iterations = options_.max_loop_iterations;
  lc.max_run_work = options_.max_run_work;
  if (lc.timeout_ms <= 0)
    return fail(std::move(r), Decision::error, Stage::infrastructure, "infrastructure: request time limit reached before loading");
  const LoadReport load = load_and_run(compiled.object, pr.packets, lc, initial);
  if (Outcome done = load_failure(r, request, compiled.object, load)) return *done;
  r.verified_insns = load.verified_insns;
  r.loop_iteration_bound = load.loop_iterations;
  r.run_work_bound = load.run_work;

  // Stage 4: behaviour.
  if (!load.map_init_error.empty())
    return fail(std::move(r), Decision::error, Stage::behaviour, "behaviour: " + load.map_init_error);
  const BehaviourCounts counts = judge_fixtures(r, request, pr, load);
  return behaviour_verdict(std::move(r), request, counts);
}

}  // namespace qwen3::verify
