// Lists the BPF programs and maps that exist system-wide, to prove the
// pipeline leaves nothing loaded.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace qwen3::verify::testing {

struct BpfObjectInfo {
  uint32_t type = 0;
  std::string name;
};

struct BpfCensus {
  std::map<uint32_t, BpfObjectInfo> programs;  // by id
  std::map<uint32_t, BpfObjectInfo> maps;
};

BpfCensus take_bpf_census();

}  // namespace qwen3::verify::testing
