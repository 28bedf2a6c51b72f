// What the repair engine (repair.h) did to a program: the edits it kept, the
// diff and the verdict after them. Apart from repair.h so that pipeline.h's
// Attempt can carry it.
#pragma once

#include <string>
#include <vector>

#include "verify/verify_result.h"

namespace qwen3::verify {

struct RepairStep {
  std::string kind;         // "packet_bounds_check", "null_check", "zero_init", "include", ... (repair_candidates.h)
  std::string description;  // what was changed, in words
  int line = 0;             // the line edited (of the source before this step)
};

struct RepairOutcome {
  bool attempted = false;        // the failure was one the engine works on (decision fail)
  bool fixed = false;            // `source` passes compile, verify and every fixture
  std::string source;            // the repaired program (only when fixed)
  std::string diff;              // unified diff original -> repaired (only when fixed)
  std::vector<RepairStep> steps; // the edits, in order (only when fixed)
  VerifyResult result;           // the verdict of the repaired program (only when fixed)
  int candidates_tried = 0;
  double elapsed_ms = 0;
  std::string note;              // why nothing was kept, when not fixed
};

}  // namespace qwen3::verify
