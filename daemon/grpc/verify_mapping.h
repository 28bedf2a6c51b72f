// The XDP verify service's proto mapping: requests into verify:: types and
// results back, every field of qwen3bpf.proto's Fixture / MapEntry /
// VerifyResult carried (a field dropped here is a check a client asked for and
// never got).
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <vector>

#include "qwen3bpf/v1/qwen3bpf.pb.h"
#include "verify/pipeline.h"
#include "verify/verify_result.h"

namespace qwen3 {

std::vector<verify::MapEntry> map_entries_from_proto(
    const google::protobuf::RepeatedPtrField<qwen3bpf::v1::MapEntry>& in);
std::vector<verify::Fixture> fixtures_from_proto(
    const google::protobuf::RepeatedPtrField<qwen3bpf::v1::Fixture>& in);
void verify_result_to_proto(const verify::VerifyResult& r, qwen3bpf::v1::VerifyResult* out);
void repair_to_proto(const verify::RepairOutcome& r, qwen3bpf::v1::RepairReport* out);
void attempt_to_proto(const verify::Attempt& a, qwen3bpf::v1::VerifyAttempt* out);

}  // namespace qwen3
