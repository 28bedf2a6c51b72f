#include "verify/verify_result.h"

namespace qwen3::verify {

const char* to_string(Decision d) {
  switch (d) {
    case Decision::pass: return "pass";
    case Decision::fail: return "fail";
    case Decision::error: return "error";
  }
  return "error";
}

const char* to_string(Stage s) {
  switch (s) {
    case Stage::none: return "none";
    case Stage::policy: return "policy";
    case Stage::compile: return "compile";
    case Stage::verify: return "verify";
    case Stage::behaviour: return "behaviour";
    case Stage::infrastructure: return "infrastructure";
    case Stage::answer: return "answer";
  }
  return "none";
}

const char* to_string(VerifierClass c) {
  switch (c) {
    case VerifierClass::none: return "none";
    case VerifierClass::packet_bounds: return "packet_bounds";
    case VerifierClass::null_check_missing: return "null_check_missing";
    case VerifierClass::uninitialized: return "uninitialized";
    case VerifierClass::unbounded_loop: return "unbounded_loop";
    case VerifierClass::invalid_helper_argument: return "invalid_helper_argument";
    case VerifierClass::invalid_context_access: return "invalid_context_access";
    case VerifierClass::other: return "other";
  }
  return "other";
}

}  // namespace qwen3::verify
