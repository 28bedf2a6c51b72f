// The repair engine (`qwen3-bpf verify --fix`, VerifyProgramRequest.fix, and
// the first step of every xdp-gen attempt): small source edits, chosen from
// the diagnosis of a failed verification (repair_candidates.h), each checked
// by the whole pipeline (compile, verify, every fixture). A candidate that
// passes is kept; one that moves the failure forward (a later stage, a later
// verifier rejection, fewer compiler errors, more fixtures passing and none
// that passed before failing) is the base of the next round. The program is
// reported fixed only when the final source passes everything, so every
// fixture that passed before still passes. The first passing candidate in the
// engine's order wins: each candidate is one small edit, so the diff stays
// minimal.
#pragma once

#include <string>
#include <vector>

#include "verify/pipeline.h"
#include "verify/repair_outcome.h"

namespace qwen3::verify {

struct RepairOptions {
  int max_candidates = 80;  // pipeline runs at most, over all rounds
  int max_rounds = 4;       // edits kept on the way to a pass
  int time_limit_ms = 60000;
};

RepairOutcome repair_program(const Pipeline& pipeline, const VerifyRequest& request, const VerifyResult& before,
                             const RepairOptions& options = {});

}  // namespace qwen3::verify
