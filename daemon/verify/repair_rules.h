// Rewrite rules for verifier rejections that are not one missing check
// (repair_candidates.h holds the first families). Each rule is a pure
// function of the program and the verdict: it appends whole-source
// candidates, and the engine (repair.h) keeps one only after the pipeline
// compiled, verified and ran it on every fixture.
// - pointer_asm: inline asm that does integer arithmetic on a register the
//   verifier tracks as a pointer ("pointer arithmetic with <<= operator
//   prohibited"): the asm statement is removed.
// - stale_packet_pointer: a packet pointer read after bpf_xdp_adjust_head/
//   tail/meta (directly or in a subprogram): data/data_end are reloaded after
//   the call and the pointer is derived again, with its bounds check.
// - map_type: a helper that needs another map type ("cannot pass map_type 2
//   into func bpf_redirect_map"): the map's declared type becomes one the
//   helper takes.
// - helper_buffer: a helper reading or writing more stack than the object
//   passed: the length becomes sizeof(object), or the object grows to the
//   length, or (bpf_xdp_load_bytes) the rest goes to the next array; a map
//   key narrower than the map's key type takes the map's key type.
// - packet_to_stack: a helper that may not read the packet ("helper access
//   to the packet is not allowed"): the bytes are copied to a stack buffer.
// - dynptr_init: a dynptr used before bpf_dynptr_from_xdp initialised it.
// Resource limits (repair_limits.cpp):
// - loop_bound: a loop the verifier cannot bound ("infinite loop detected",
//   "too complex", "program is too large") becomes `#pragma unroll` +
//   `for (__u32 loop_bound_N = 0; loop_bound_N < CAP; loop_bound_N++)` whose
//   body starts with `if (!(cond)) break;` (CAP 8, 64, 256), innermost loop
//   around the rejected line first.
// - stack_to_map: clang's "BPF stack limit is exceeded" or the verifier's
//   "combined stack size": a large local array or struct moves to a
//   one-entry BPF_MAP_TYPE_PERCPU_ARRAY, looked up where it was declared
//   (zeroed there if it was `= {}`); sizeof and member accesses follow.
#pragma once

#include <string>
#include <vector>

#include "verify/repair_candidates.h"
#include "verify/repair_text.h"

namespace qwen3::verify {

void pointer_asm_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);
void stale_packet_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);
void map_type_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);
void helper_buffer_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);
void packet_to_stack_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);
void dynptr_init_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);
void loop_bound_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);
void stack_size_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out);

// The header line of the function that contains `line` (0: none): the last line
// before it that starts in column 0 with a name and has a '(' but no ';'.
int function_start(const Source& src, int line);

// The values the function around `line` returns (XDP_PASS, -1, ...), the one
// nearest after `line` first; XDP_PASS and XDP_DROP in the XDP function.
std::vector<std::string> return_values(const Source& src, int line);

}  // namespace qwen3::verify
