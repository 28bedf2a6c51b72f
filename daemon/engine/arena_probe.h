// Whether this kernel lets the daemon create a BPF arena map, which
// weight_path = arena needs. Some kernels refuse (seen: EPERM on a 6.18.44
// guest kernel under lockdown=integrity), so the loader asks first and says
// so instead of failing inside libbpf's map creation.
#pragma once

#include <string>

namespace qwen3::engine {

// Empty when an arena map can be created and mmapped here; otherwise the
// kernel's answer ("BPF_MAP_CREATE of an arena: Operation not permitted").
// Probed once per process.
const std::string& arena_refusal();

}  // namespace qwen3::engine
