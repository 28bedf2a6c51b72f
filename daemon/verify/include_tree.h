// The private include tree the sandboxed compiler sees as its only system
// headers: copies of libbpf's bpf/*.h, the kernel uapi linux/ (+ asm,
// asm-generic it needs) and vmlinux.h dumped from the running kernel's BTF.
#pragma once

#include <string>

namespace qwen3::verify {

struct IncludeTreeSources {
  std::string usr_include = "/usr/include";
  std::string kernel_btf = "/sys/kernel/btf/vmlinux";
  std::string bpftool = "bpftool";
};

// Builds <data_dir>/include if missing or made for another kernel/BTF, and
// returns its path. Safe to call concurrently within one process. Throws
// qwen3::Error naming the file or command that failed.
std::string prepare_include_tree(const std::string& data_dir, const IncludeTreeSources& sources = {});

}  // namespace qwen3::verify
