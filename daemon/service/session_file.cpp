#include "service/session_file.h"

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "service/model_identity.h"
#include "sessions/session.h"
#include "sessions/session_manager.h"

namespace qwen3 {

namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'Q', '3', 'S', 'E', 'S', 'S', 'N', '\n'};
constexpr size_t kDigest = 32;
constexpr size_t kFixed = 8 + 4 + 4;  // magic, version, header length

template <class T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
}

template <class T>
T get_le(std::string_view b, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return static_cast<T>(v);
}

Error bad(const std::string& m) { return invalid_argument("session export: " + m); }

std::string bytes_text(uint64_t n) { return std::to_string(n) + " byte" + (n == 1 ? "" : "s"); }

std::string digest_bytes(std::string_view data) {
  const std::string h = sha256_hex(data.data(), data.size());
  std::string out;
  for (size_t i = 0; i < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

const json& member(const json& j, const char* key, const char* where) {
  const auto it = j.find(key);
  if (it == j.end()) throw bad(std::string("header has no \"") + key + "\" in " + where);
  return *it;
}

int64_t int_of(const json& j, const char* key, const char* where, int64_t lo, int64_t hi) {
  const json& v = member(j, key, where);
  if (!v.is_number_integer()) throw bad(std::string("header field ") + where + "." + key + " is not an integer");
  const int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? -1 : v.get<int64_t>();
  if (i < lo || i > hi)
    throw bad(std::string("header field ") + where + "." + key + " = " + v.dump() + " is outside [" + std::to_string(lo) +
              ", " + std::to_string(hi) + "]");
  return i;
}

std::string str_of(const json& j, const char* key, const char* where) {
  const json& v = member(j, key, where);
  if (!v.is_string()) throw bad(std::string("header field ") + where + "." + key + " is not a string");
  return v.get<std::string>();
}

json header_of(const SessionFile& f) {
  json kv = nullptr;
  if (f.has_kv)
    kv = {{"bits", f.kv.bits}, {"entry_bytes", f.kv.entry_bytes}, {"block", f.kv.block}, {"entries", f.kv.entries}};
  return {{"format", "qwen3-bpfd session"},
          {"daemon_version", f.daemon_version},
          {"created_unix_ms", f.created_unix_ms},
          {"model",
           {{"sha256", f.model_sha256},
            {"name", f.model_name},
            {"layers", f.layers},
            {"kv_heads", f.kv_heads},
            {"head_dim", f.head_dim},
            {"vocab_size", f.vocab_size}}},
          {"backend", f.backend},
          {"precision", f.precision},
          {"kv", kv},
          {"session",
           {{"id", f.id},
            {"owner_uid", f.owner_uid},
            {"max_context", f.max_context},
            {"positions", f.positions},
            {"history", f.history}}}};
}

void read_header(const json& h, SessionFile& f) {
  if (!h.is_object()) throw bad("the header is not a JSON object");
  const json& m = member(h, "model", "the header");
  if (!m.is_object()) throw bad("header field model is not an object");
  f.model_sha256 = str_of(m, "sha256", "model");
  if (f.model_sha256.size() != 64) throw bad("header field model.sha256 is not 64 hex digits");
  f.model_name = str_of(m, "name", "model");
  f.layers = static_cast<int>(int_of(m, "layers", "model", 1, 4096));
  f.kv_heads = static_cast<int>(int_of(m, "kv_heads", "model", 1, 4096));
  f.head_dim = static_cast<int>(int_of(m, "head_dim", "model", 1, 65536));
  f.vocab_size = static_cast<int>(int_of(m, "vocab_size", "model", 1, std::numeric_limits<int>::max()));
  f.backend = str_of(h, "backend", "the header");
  f.precision = str_of(h, "precision", "the header");
  f.daemon_version = str_of(h, "daemon_version", "the header");
  f.created_unix_ms = int_of(h, "created_unix_ms", "the header", 0, INT64_MAX);
  const json& s = member(h, "session", "the header");
  if (!s.is_object()) throw bad("header field session is not an object");
  f.id = str_of(s, "id", "session");
  validate_session_id(f.id);
  f.owner_uid = static_cast<uint32_t>(int_of(s, "owner_uid", "session", 0, std::numeric_limits<uint32_t>::max()));
  f.max_context = static_cast<int>(int_of(s, "max_context", "session", 1, std::numeric_limits<int>::max()));
  f.positions = static_cast<int>(int_of(s, "positions", "session", 0, f.max_context));
  const json& hist = member(s, "history", "session");
  if (!hist.is_array()) throw bad("header field session.history is not an array");
  for (const json& t : hist) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= f.vocab_size)
      throw bad("session.history holds " + t.dump() + ", not a token id below vocab_size " + std::to_string(f.vocab_size));
    f.history.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (f.positions > static_cast<int>(f.history.size()))
    throw bad("session.history has " + std::to_string(f.history.size()) + " tokens, fewer than its " +
              std::to_string(f.positions) + " positions");
  if (static_cast<int>(f.history.size()) > f.max_context)
    throw bad("session.history has more tokens than max_context " + std::to_string(f.max_context));
  const json& kv = member(h, "kv", "the header");
  f.has_kv = !kv.is_null();
  if (f.has_kv) {
    if (!kv.is_object()) throw bad("header field kv is neither null nor an object");
    f.kv.bits = static_cast<int>(int_of(kv, "bits", "kv", 8, 16));
    f.kv.entry_bytes = static_cast<uint32_t>(int_of(kv, "entry_bytes", "kv", 1, 1 << 30));
    f.kv.block = static_cast<int>(int_of(kv, "block", "kv", 1, 1 << 20));
    f.kv.entries = static_cast<uint64_t>(int_of(kv, "entries", "kv", 0, INT64_MAX));
  }
}

}  // namespace

std::string encode_session_file(const SessionFile& f) {
  const std::string header = header_of(f).dump();
  std::string out(kMagic, sizeof kMagic);
  put_le<uint32_t>(out, kSessionFileVersion);
  put_le<uint32_t>(out, static_cast<uint32_t>(header.size()));
  out += header;
  put_le<uint64_t>(out, f.has_kv ? f.kv_data.size() : 0);
  if (f.has_kv) out += f.kv_data;
  out += digest_bytes(out);
  return out;
}

SessionFile decode_session_file(std::string_view b) {
  if (b.size() < sizeof kMagic || std::memcmp(b.data(), kMagic, sizeof kMagic) != 0)
    throw bad("not a qwen3-bpfd session export (it does not start with the magic \"Q3SESSN\"; " + bytes_text(b.size()) + ")");
  if (b.size() < kFixed) throw bad("truncated: " + bytes_text(b.size()) + ", shorter than the fixed part");
  const uint32_t version = get_le<uint32_t>(b, 8);
  if (version != kSessionFileVersion)
    throw bad("format version " + std::to_string(version) + "; this daemon reads version " +
              std::to_string(kSessionFileVersion) + " (export it again with this daemon's version)");
  const uint64_t header_len = get_le<uint32_t>(b, 12);
  const uint64_t kv_at = kFixed + header_len;
  if (b.size() < kv_at + 8 + kDigest)
    throw bad("truncated: " + bytes_text(b.size()) + ", but the header alone says at least " +
              bytes_text(kv_at + 8 + kDigest));
  const uint64_t kv_len = get_le<uint64_t>(b, kv_at);
  if (kv_len > (uint64_t{1} << 48)) throw bad("the KV part claims " + bytes_text(kv_len) + ": not an export of this format");
  const uint64_t want = kv_at + 8 + kv_len + kDigest;
  if (b.size() < want) throw bad("truncated: " + bytes_text(b.size()) + " of " + bytes_text(want) + " (" +
                                 bytes_text(want - b.size()) + " missing)");
  if (b.size() > want) throw bad(bytes_text(b.size() - want) + " of trailing data after the checksum (" +
                                 bytes_text(want) + " expected)");
  if (digest_bytes(b.substr(0, want - kDigest)) != b.substr(want - kDigest))
    throw bad("checksum mismatch: the file was altered or damaged after export (SHA-256 of its " +
              bytes_text(want - kDigest) + " does not match the one it carries)");
  SessionFile f;
  json header;
  try {
    header = json::parse(b.substr(kFixed, header_len));
  } catch (const std::exception& e) {
    throw bad(std::string("the header is not JSON: ") + e.what());
  }
  try {
    read_header(header, f);
  } catch (const Error& e) {
    const std::string m = e.what();
    throw m.rfind("session export: ", 0) == 0 ? e : bad("header: " + m);
  }
  if (f.has_kv != (kv_len > 0) && !(f.has_kv && f.kv.entries == 0))
    throw bad("the header says " + std::string(f.has_kv ? "KV included" : "no KV") + " but the KV part has " +
              bytes_text(kv_len));
  if (f.has_kv && f.kv.entries * f.kv.entry_bytes != kv_len)
    throw bad("the KV part has " + bytes_text(kv_len) + ", the header says " + std::to_string(f.kv.entries) +
              " entries of " + bytes_text(f.kv.entry_bytes));
  if (f.has_kv) f.kv_data.assign(b.substr(kv_at + 8, kv_len));
  return f;
}

}  // namespace qwen3
