#include "engine/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace qwen3::engine {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
// memory.limit_in_bytes reads 2^63 - page when unset; anything this large is "no limit".
constexpr uint64_t kNoLimit = uint64_t(1) << 60;

bool read_text(const std::string& path, std::string& out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

// One number file (memory.max may read "max": no limit).
bool read_number(const std::string& path, uint64_t& v) {
  std::string t;
  if (!read_text(path, t)) return false;
  if (t.rfind("max", 0) == 0) {
    v = UINT64_MAX;
    return true;
  }
  return std::sscanf(t.c_str(), "%lu", &v) == 1;
}

// "key value" files: /proc/meminfo (kB), memory.stat (bytes).
uint64_t field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k) {
    if (!k.empty() && k.back() == ':') k.pop_back();
    if (k == key && in >> v) return v;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// Where this process's memory cgroup lives: the controller's mount point plus
// its path under the mount's root ("" when there is no memory controller).
struct CgroupDir {
  std::string base, dir;
  bool v1 = false;
};

CgroupDir find_cgroup(const std::string& root) {
  std::string cg, mi;
  if (!read_text(root + "/proc/self/cgroup", cg) || !read_text(root + "/proc/self/mountinfo", mi)) return {};
  std::string v1_path, v2_path;
  bool have_v1 = false, have_v2 = false;
  std::istringstream lines(cg);
  for (std::string l; std::getline(lines, l);) {
    size_t a = l.find(':'), b = a == std::string::npos ? a : l.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string ctl = "," + l.substr(a + 1, b - a - 1) + ",";
    if (ctl.find(",memory,") != std::string::npos) v1_path = l.substr(b + 1), have_v1 = true;
    if (l.compare(0, a, "0") == 0 && ctl == ",,") v2_path = l.substr(b + 1), have_v2 = true;
  }
  std::istringstream mounts(mi);
  for (std::string l; std::getline(mounts, l);) {
    std::istringstream f(l);
    std::string id, parent, dev, mroot, mpoint, tok;
    f >> id >> parent >> dev >> mroot >> mpoint;
    while (f >> tok && tok != "-") {}
    std::string fstype, src, opts;
    f >> fstype >> src >> opts;
    const bool v1 = fstype == "cgroup" && ("," + opts + ",").find(",memory,") != std::string::npos;
    if (!(v1 && have_v1) && !(fstype == "cgroup2" && have_v2 && !have_v1)) continue;
    std::string path = v1 ? v1_path : v2_path;
    if (mroot != "/" && path.rfind(mroot, 0) == 0) path = path.substr(mroot.size());
    if (!path.empty() && path.back() == '/') path.pop_back();
    return {root + mpoint, root + mpoint + path, v1};
  }
  return {};
}

// The tightest room under the limits of the cgroup and its ancestors.
bool cgroup_room(const CgroupDir& cg, uint64_t& room, std::string& source) {
  bool found = false;
  for (std::string d = cg.dir; d.size() >= cg.base.size();) {
    uint64_t limit = 0, usage = 0;
    std::string stat;
    const bool limited = read_number(d + (cg.v1 ? "/memory.limit_in_bytes" : "/memory.max"), limit) &&
                         limit < kNoLimit &&
                         read_number(d + (cg.v1 ? "/memory.usage_in_bytes" : "/memory.current"), usage);
    if (limited) {
      read_text(d + "/memory.stat", stat);
      const uint64_t inactive = field(stat, cg.v1 ? "total_inactive_file" : "inactive_file");
      const uint64_t r = limit + inactive > usage ? limit + inactive - usage : 0;
      if (!found || r < room) {
        room = r;
        source = "the memory cgroup's limit (" + d + (cg.v1 ? "/memory.limit_in_bytes " : "/memory.max ") +
                 format_bytes(limit) + ", in use " + format_bytes(usage) + " of which " + format_bytes(inactive) +
                 " reclaimable file pages)";
      }
      found = true;
    }
    if (d == cg.base) break;
    const size_t slash = d.rfind('/');
    if (slash == std::string::npos || slash < cg.base.size()) d = cg.base;
    else d = d.substr(0, slash);
  }
  return found;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  char b[48];
  if (bytes >= (uint64_t(1) << 30)) std::snprintf(b, sizeof b, "%.2f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= kMiB) std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / double(kMiB));
  else std::snprintf(b, sizeof b, "%.1f KiB", double(bytes) / 1024.0);
  return b;
}

MemoryLimit host_memory_limit(const std::string& root) {
  MemoryLimit out;
  std::string mi;
  if (read_text(root + "/proc/meminfo", mi)) {
    const uint64_t total = field(mi, "MemTotal") * 1024, avail = field(mi, "MemAvailable") * 1024;
    const uint64_t margin = std::max<uint64_t>(256 * kMiB, total / 32);
    out.bytes = avail > margin ? avail - margin : 0;
    out.source = "MemAvailable " + format_bytes(avail) + " less a safety margin of " + format_bytes(margin) +
                 " (1/32 of MemTotal, at least 256 MiB; /proc/meminfo)";
  } else {
    out.bytes = UINT64_MAX;
    out.source = "no /proc/meminfo";
  }
  uint64_t room = 0;
  std::string source;
  if (cgroup_room(find_cgroup(root), room, source) && room < out.bytes) {
    out.bytes = room;
    out.source = source + "; smaller than " + out.source;
  }
  return out;
}

void check_memory_fit(const MemoryNeed& need, const MemoryLimit& limit) {
  const uint64_t total = need.weights + need.buffers + need.kv_budget;
  if (total <= limit.bytes) return;
  std::string m = "the model does not fit the memory the engine may use: it needs " + format_bytes(total) + " (" +
                  need.weights_what + " " + format_bytes(need.weights) + ", buffers " + format_bytes(need.buffers) +
                  ", KV budget " + format_bytes(need.kv_budget) + " (" + need.kv_what + ")), but the limit is " +
                  format_bytes(limit.bytes) + ", from " + limit.source + ": " + format_bytes(total - limit.bytes) +
                  " short.";
  if (!need.remedies.empty()) {
    m += " Change one of:";
    for (size_t i = 0; i < need.remedies.size(); i++) m += (i ? "; " : " ") + need.remedies[i];
  }
  throw resource_exhausted(m);
}

}  // namespace qwen3::engine
