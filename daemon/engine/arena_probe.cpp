#include "engine/arena_probe.h"

#include <bpf/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace qwen3::engine {
namespace {

// BPF_MAP_TYPE_ARENA (Linux 6.9); Debian 12's uapi headers predate it.
constexpr int kMapTypeArena = 33;
constexpr unsigned kProbePages = 1;

std::string probe() {
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
  const int fd = bpf_map_create(static_cast<bpf_map_type>(kMapTypeArena), "qn_arena_probe", 0, 0, kProbePages, &opts);
  if (fd < 0) return std::string("BPF_MAP_CREATE of an arena: ") + std::strerror(errno);
  const size_t bytes = kProbePages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (mem == MAP_FAILED) return std::string("mmap of an arena: ") + std::strerror(err);
  munmap(mem, bytes);
  return "";
}

}  // namespace

const std::string& arena_refusal() {
  static const std::string answer = probe();
  return answer;
}

}  // namespace qwen3::engine
