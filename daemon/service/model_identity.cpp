#include "service/model_identity.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/error.h"
#include "model/model_dir.h"

namespace qwen3 {

namespace {

std::string hex(const unsigned char* d, unsigned n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned i = 0; i < n; ++i) {
    out += digits[d[i] >> 4];
    out += digits[d[i] & 15];
  }
  return out;
}

// One EVP digest context, freed with it.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) throw Error("OpenSSL: cannot start SHA-256");
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void add(const void* d, size_t n) {
    if (n && EVP_DigestUpdate(ctx_, d, n) != 1) throw Error("OpenSSL: SHA-256 update failed");
  }
  void add_field(const std::string& s) {  // length-prefixed: fields cannot run into each other
    const uint64_t n = s.size();
    add(&n, sizeof n);
    add(s.data(), s.size());
  }
  std::string hex_digest() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (EVP_DigestFinal_ex(ctx_, out, &n) != 1) throw Error("OpenSSL: SHA-256 final failed");
    return hex(out, n);
  }

 private:
  EVP_MD_CTX* ctx_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path + " for the model's identity: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string compute(const ModelDir& m) {
  Sha256 h;
  h.add_field("qwen3-bpfd model identity v1");
  h.add_field(read_file(m.path() + "/config.json"));
  std::vector<std::string> names = m.tensor_names();
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const TensorView& t = m.tensor(name);
    h.add_field(name);
    h.add_field(dtype_name(t.dtype));
    std::string shape;
    for (int64_t d : t.shape) shape += std::to_string(d) + ",";
    h.add_field(shape);
    const uint64_t n = t.nbytes;
    h.add(&n, sizeof n);
    h.add(t.data, t.nbytes);
  }
  return h.hex_digest();
}

}  // namespace

std::string sha256_hex(const void* data, size_t size) {
  Sha256 h;
  h.add(data, size);
  return h.hex_digest();
}

std::string model_identity(const std::shared_ptr<const ModelDir>& model) {
  if (!model) throw unavailable("no model loaded");
  static std::mutex mu;
  static std::weak_ptr<const ModelDir> cached_for;
  static std::string cached;
  std::lock_guard lock(mu);
  if (auto c = cached_for.lock(); c && c == model) return cached;
  cached = compute(*model);
  cached_for = model;
  return cached;
}

}  // namespace qwen3
