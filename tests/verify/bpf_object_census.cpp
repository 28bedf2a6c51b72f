#include "bpf_object_census.h"

#include <bpf/bpf.h>
#include <unistd.h>

namespace qwen3::verify::testing {

BpfCensus take_bpf_census() {
  BpfCensus c;
  __u32 id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    BpfObjectInfo info;
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd >= 0) {
      struct bpf_prog_info pi = {};
      __u32 len = sizeof pi;
      if (bpf_prog_get_info_by_fd(fd, &pi, &len) == 0) {
        info.type = pi.type;
        info.name = pi.name;
      }
      close(fd);
    }
    c.programs[id] = info;
  }
  id = 0;
  while (bpf_map_get_next_id(id, &id) == 0) {
    BpfObjectInfo info;
    int fd = bpf_map_get_fd_by_id(id);
    if (fd >= 0) {
      struct bpf_map_info mi = {};
      __u32 len = sizeof mi;
      if (bpf_map_get_info_by_fd(fd, &mi, &len) == 0) {
        info.type = mi.type;
        info.name = mi.name;
      }
      close(fd);
    }
    c.maps[id] = info;
  }
  return c;
}

}  // namespace qwen3::verify::testing
