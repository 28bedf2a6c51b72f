// The structured answer of the XDP verification pipeline (VerifyProgram).
// Shared by daemon/verify (which fills it) and daemon/service (which turns it
// into the gRPC message) so the two can be built independently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qwen3::verify {

enum class Decision { pass, fail, error };
// `answer`: the model's answer held no C source (xdp-gen only; never from Pipeline::verify).
enum class Stage { none, policy, compile, verify, behaviour, infrastructure, answer };
enum class VerifierClass {
  none,
  packet_bounds,
  null_check_missing,
  uninitialized,          // register or stack slot read before written
  unbounded_loop,         // back-edge, or the complexity / instruction limit
  invalid_helper_argument,
  invalid_context_access,
  other,
};

struct Diagnostic {
  std::string stage_message;  // one-line human summary
  int line = 0;               // source line (1-based), 0 if unknown
  int column = 0;
  std::string text;           // compiler diagnostic or verifier message
};

// One map element: initial contents of a fixture file, or a value a fixture
// expects after its run. Hex as in packets.
struct MapEntry {
  std::string map;        // the map's name in the program
  std::string key_hex;
  std::string value_hex;
};

struct Fixture {
  std::string name;
  std::string packet_hex;
  std::string expected_action;        // XDP_ABORTED|XDP_DROP|XDP_PASS|XDP_TX|XDP_REDIRECT
  std::string expected_packet_hex;    // empty: output packet not checked
  // Added by daemon/verify (fixture files in the BPF-Guardian format):
  // (Default member initializers keep 4-value aggregate initialisations warning-free.)
  std::vector<MapEntry> expected_maps = {};  // map values to check after the run
  // What the file's validator asks to check: "packet_action", "packet_bytes",
  // "map_state" or "" (bare array: the action, plus bytes when given).
  std::string validator = {};
};

struct FixtureResult {
  std::string name;
  bool passed = false;
  std::string expected_action;
  std::string got_action;
  std::string expected_packet_hex;
  std::string got_packet_hex;
  std::string note;  // e.g. why a fixture could not run
  bool ran = false;  // the kernel ran it (false: got_action is "NOT_RUN", note says why)
  // What the validator asked for but the fixture gave no expected value for:
  // "output bytes: not checked: no expected value given" (never a silent pass).
  std::string not_checked;
  // What the run cost (ran only): the kernel's own measure of the program's
  // run, and the loader's CPU time for the whole test-run call.
  uint64_t run_ns = 0;
  int64_t cpu_ns = 0;
};

// An edit the repair engine would try first for this failure (repair_candidates.h),
// as a unified diff of the whole program. Proposed, not checked: only the engine
// (`verify --fix`) compiles, verifies and runs a candidate before keeping it.
struct FixIt {
  std::string kind;         // "packet_bounds_check", "null_check", "pointer_asm", ...
  std::string description;  // the edit in words
  int line = 0;             // the line it edits (of the program as given)
  std::string diff;         // unified diff, "--- a/prog.c" / "+++ b/prog.c"
};

struct VerifyResult {
  Decision decision = Decision::error;
  Stage first_failed_stage = Stage::none;
  std::string summary;
  std::vector<Diagnostic> compiler_diagnostics;
  std::string verifier_log_excerpt;
  int verifier_line = 0;           // source line of the rejected instruction (BTF line info)
  std::string verifier_source_line;
  VerifierClass verifier_class = VerifierClass::none;
  uint32_t verified_insns = 0;
  std::vector<FixtureResult> fixtures;
  // Added by daemon/verify: whether any fixture ran (false with no fixtures:
  // a pass then only means "compiles and verifies", and the summary says so),
  // and the verifier's own error line(s) (e.g. "R2 invalid mem access 'scalar'").
  bool behaviour_checked = false;
  std::string verifier_message;
  int verifier_insn = -1;          // index of the rejected instruction, -1 if unknown
  int verifier_column = 0;         // its column (BTF line info of the object), 0 if unknown
  std::string compile_sandbox;     // how clang was confined, e.g. "namespaces+landlock" ("" if not compiled)
  int fixtures_not_run = 0;        // fixtures the kernel could not run (e.g. frames under 14 bytes)
  int fixtures_not_checked = 0;    // fixtures with something the validator wanted left unchecked
  // bpfix-style diagnosis of a failure (empty on pass): a stable id
  // ("BPFV-PKT-001"), its class, the source span of the instruction that lost
  // the proof (or of the offending construct), and what to do next.
  std::string error_id;
  std::string error_class;
  int span_line = 0;
  int span_column_start = 0;       // 1-based, 0 if unknown
  int span_column_end = 0;         // exclusive
  std::string span_text;           // the source line
  std::string next_action;
  // The loop budget's bounds for one test-run (0 when the verifier refused the
  // program): loop iterations the verifier did not walk, and instructions.
  uint64_t loop_iteration_bound = 0;
  uint64_t run_work_bound = 0;
  // Where the verifier's proof was lost or never made (proof_trace.h), for
  // verifier rejections the log lets us trace: the source line (0 if unknown)
  // and what happened there ("the bounds check proves 14 bytes, the access
  // needs 24"), and the proof the verifier needed, in the program's terms
  // ("data + 24 <= data_end before line 17").
  int proof_line = 0;
  std::string proof_source_line;
  std::string proof_note;
  std::string required_proof;
  // The diagnosis in under 1,200 characters, for a model's repair turn
  // (short_diagnostic.h); empty on pass.
  std::string short_diagnostic;
  // Compile and verifier failures: the first edits the repair engine would try (at most 3).
  std::vector<FixIt> fixits;
};

const char* to_string(Decision d);
const char* to_string(Stage s);
const char* to_string(VerifierClass c);

}  // namespace qwen3::verify
