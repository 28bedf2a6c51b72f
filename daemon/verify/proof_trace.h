// Where the verifier's proof was lost, or never made: from the rejected
// instruction back along the path the verifier walked (the state after each
// instruction, printed at log level 2; "from A to B" jumps followed back to
// A) to the instruction that should have made the proof or undid it:
// - packet bounds: the last comparison with data_end on the path (it proves
//   fewer bytes than the access needs), else where the pointer was loaded
//   from ctx->data (never compared);
// - NULL: the helper call that returned the _or_null pointer;
// - uninitialised stack: the last store into the object passed or read;
//   an unwritten register: the function's entry;
// - otherwise: the last instruction that wrote the register the failing
//   instruction uses.
#pragma once

#include <string>

#include "verify/verify_result.h"

namespace qwen3::verify {

struct ProofTrace {
  int insn = -1;          // the instruction where the proof was lost / should have been made
  int line = 0;           // its source line in the program (0: unknown or in a header)
  std::string note;       // what happened there, in words
  std::string required;   // the proof the verifier needed, in the program's terms ("" if unknown)
};

// `log` is the verifier log (level 2 preferred, level 1 works with less),
// `main_file` the name the program's lines carry in its annotations,
// `failing_line` the source line of the rejected instruction.
ProofTrace trace_lost_proof(const std::string& log, const std::string& main_file, int failing_line,
                            VerifierClass cls, const std::string& message);

}  // namespace qwen3::verify
