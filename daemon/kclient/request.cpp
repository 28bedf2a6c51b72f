#include "kclient/request.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "kclient_abi.h"

namespace qwen3::kclient {

namespace {

std::optional<float> q16(uint32_t v) {
  if (v == QK_UNSET) return std::nullopt;
  return static_cast<float>(v / 65536.0);
}

std::string source_of(const qk_submission& r) {
  if (r.origin != QK_ORIGIN_UDP) return "bpf";
  char addr[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = r.saddr;
  inet_ntop(AF_INET, &a, addr, sizeof addr);
  return std::string(addr) + ":" + std::to_string(ntohs(r.sport));
}

}  // namespace

std::string session_of(const char (&bytes)[32]) {
  size_t n = 0;
  while (n < QK_SESSION_BYTES && bytes[n]) ++n;
  for (size_t i = n; i < QK_SESSION_BYTES; ++i)
    if (bytes[i]) return "";
  if (n == 0) return "";
  for (size_t i = 0; i < n; ++i) {
    const char c = bytes[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) return "";
  }
  return std::string(bytes, n);
}

KernelRequest decode_submission(const qk_submission& r, size_t record_bytes) {
  if (record_bytes < sizeof(qk_submission)) throw invalid_argument("submission record too short");
  const qk_generate& g = r.data;
  if (r.origin != QK_ORIGIN_UDP && r.origin != QK_ORIGIN_BPF) throw invalid_argument("unknown origin");
  if (r.len < QK_GENERATE_FIXED || r.len > sizeof(qk_generate)) throw invalid_argument("bad length");
  if (g.hdr.magic != QK_MAGIC || g.hdr.version != QK_VERSION) throw invalid_argument("bad magic or version");
  if (g.hdr.kind != QK_GENERATE) throw invalid_argument("not a generate request");
  if (g.hdr.flags & ~QK_F_ALL) throw invalid_argument("unknown flags");
  if (g.hdr.request_id == 0) throw invalid_argument("request_id is 0");
  KernelRequest k;
  k.session = session_of(g.hdr.session);
  if (k.session.empty()) throw invalid_argument("session id is not 1..32 of [A-Za-z0-9_.-]");
  if (g.max_tokens == 0 || g.max_tokens > QK_MAX_TOKENS) throw invalid_argument("max_tokens out of range");
  k.text = g.hdr.flags & QK_F_TEXT;
  const size_t bytes = static_cast<size_t>(g.prompt_len) * (k.text ? 1 : 4);
  if (g.prompt_len == 0 || bytes > QK_MAX_PROMPT_BYTES || QK_GENERATE_FIXED + bytes > r.len)
    throw invalid_argument("prompt_len does not fit the datagram");
  k.request_id = g.hdr.request_id;
  k.append = g.hdr.flags & QK_F_APPEND;
  if (k.text) {
    k.prompt_text.assign(reinterpret_cast<const char*>(g.prompt), bytes);
  } else {
    k.prompt_ids.resize(g.prompt_len);
    std::memcpy(k.prompt_ids.data(), g.prompt, bytes);  // little-endian host (x86_64, arm64)
  }
  k.max_tokens = g.max_tokens;
  const qk_sampling& s = g.sampling;
  k.sampling.temperature = q16(s.temperature_q16);
  k.sampling.top_p = q16(s.top_p_q16);
  k.sampling.min_p = q16(s.min_p_q16);
  k.sampling.repetition_penalty = q16(s.repetition_penalty_q16);
  if (s.top_k != QK_UNSET) k.sampling.top_k = static_cast<int>(std::min<uint32_t>(s.top_k, 1u << 30));
  if (s.seed_set) k.sampling.seed = s.seed;
  k.origin = r.origin;
  k.source = source_of(r);
  return k;
}

}  // namespace qwen3::kclient
