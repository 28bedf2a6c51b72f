// Reading what libbpf and the verifier said about a failed load: the program
// that failed, the log's tail, and the line that names the limit it hit, so a
// load error (and `verify_programs`) says which limit stops a model shape.
#pragma once

#include <string>

namespace qwen3::engine {

// The last `lines` lines of `text`.
std::string tail_lines(const std::string& text, int lines);

// The program libbpf failed to load ("prog 'qn_matmul': failed to load"), or "unknown program".
std::string failed_program(const std::string& log);

// The verifier's or libbpf's line that names the limit a load hit, prefixed
// with what the limit is ("instruction limit: BPF program is too large.
// Processed 1000001 insn"); the last error-looking line when no known limit
// matches; empty for an empty log.
std::string verifier_limit(const std::string& log);

}  // namespace qwen3::engine
