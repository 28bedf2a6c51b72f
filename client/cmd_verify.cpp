// `qwen3-bpf verify PROG.c [--fix]`: the XDP program verification service,
// with its structured diagnostic printed readably, and the repair engine.
#include <iostream>

#include "cli_error.h"
#include "command.h"
#include "json_output.h"
#include "verify_output.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

int run_verify(Command& cmd) {
  const Args& a = cmd.args();
  if (a.positional().size() != 1) throw usage_error("usage: qwen3-bpf verify PROG.c [--fixtures TESTS.json] [--fix]");
  const std::string path = a.positional()[0];
  v1::VerifyProgramRequest req;
  req.set_source(read_file_or_stdin(path, "program"));
  if (auto f = a.get("fixtures")) {
    auto file = load_fixtures(*f);
    for (auto& fx : file.fixtures) *req.add_fixtures() = std::move(fx);
    for (auto& m : file.initial_maps) *req.add_initial_maps() = std::move(m);
  }
  req.set_fix(a.has("fix"));
  v1::VerifyProgramResponse resp;
  grpc::ClientContext ctx;
  cmd.client().check(cmd.client().stub().VerifyProgram(&ctx, req, &resp), "verify");
  const std::string name = path == "-" ? "<stdin>" : path;
  if (cmd.json()) {
    std::cout << to_json(resp) << "\n";
  } else {
    print_result(resp.result(), name);
    if (req.fix()) print_repair(resp.repair(), name);
  }
  // With --fix, the verdict is the one after the fix.
  const bool passed = resp.result().decision() == v1::DECISION_PASS || (req.fix() && resp.repair().fixed());
  return passed ? kExitOk : kExitFailed;
}

}  // namespace

CommandInfo verify_command() {
  return CommandInfo{"verify",
                     "compile, verify and test-run an XDP program (--fixtures F)",
                     "verify PROG.c [--fixtures TESTS.json] [--fix] [--json]",
                     "Compiles one XDP program (SEC(\"xdp\")), loads it through the kernel verifier and runs the\n"
                     "fixtures through BPF_PROG_TEST_RUN, in the daemon. Prints the decision, the failed stage,\n"
                     "compiler errors with line numbers, the verifier's rejection (class, log excerpt, source\n"
                     "line) and each fixture's expected/got. Exit 0 on pass, 1 otherwise. PROG.c '-' reads stdin.\n"
                     "TESTS.json: [{\"name\", \"packet_hex\", \"expected_action\", \"expected_packet_hex\"?,\n"
                     "\"expected_maps\"?}], {\"fixtures\": [...], \"maps\": [initial map contents]}, or a\n"
                     "BPF-Guardian tests.json unchanged (see docs/xdp-verify.md).\n"
                     "--fix: on failure the daemon's repair engine tries small edits (bounds and NULL checks,\n"
                     "zero-initialisation, includes, clang's fix-its, behavioural mutations against the\n"
                     "fixtures); an edit is kept only when compile, verify and every fixture pass. Prints the\n"
                     "unified diff and the verdict after the fix; exit 0 when the fixed program passes.",
                     {{"fixtures", true, false, "TESTS.json  packet fixtures to run"},
                      {"fix", false, false, "repair a failing program: print the diff and the verdict after it"}},
                     run_verify};
}

}  // namespace qwen3::cli
