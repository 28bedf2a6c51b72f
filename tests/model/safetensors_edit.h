// Test helpers: a safetensors file as (header JSON, data bytes) that tests can
// damage and write back, and scratch directories holding copies of models.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qwen3::test {

namespace fs = std::filesystem;

// Paths the build bakes in (tests/model/CMakeLists.txt); the environment
// variable of the same name overrides them.
inline std::string env_or_fail(const char* name) {
  if (const char* v = std::getenv(name); v && *v) return v;
  const std::string n = name;
#ifdef QWEN3_TEST_MODELS_DIR_DEFAULT
  if (n == "QWEN3_TEST_MODELS_DIR") return QWEN3_TEST_MODELS_DIR_DEFAULT;
#endif
#ifdef QWEN3_TEST_TOKENIZER_DIR_DEFAULT
  if (n == "QWEN3_TEST_TOKENIZER_DIR") return QWEN3_TEST_TOKENIZER_DIR_DEFAULT;
#endif
#ifdef QWEN3_MKMODEL_DEFAULT
  if (n == "QWEN3_MKMODEL") return QWEN3_MKMODEL_DEFAULT;
#endif
  ADD_FAILURE() << name << " is not set; run the test through ctest (tests/*/CMakeLists.txt sets it)";
  return "/nonexistent";
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct SafetensorsImage {
  nlohmann::ordered_json header;
  std::string data;  // bytes after the header

  static SafetensorsImage read(const fs::path& p) {
    std::string all = slurp(p);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(all[i]);
    SafetensorsImage img;
    img.header = nlohmann::ordered_json::parse(all.substr(8, n));
    img.data = all.substr(8 + n);
    return img;
  }

  static std::string length_prefix(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return s;
  }

  void write(const fs::path& p) const {
    std::string h = header.dump();
    while (h.size() % 8) h.push_back(' ');
    spit(p, length_prefix(h.size()) + h + data);
  }

  // Byte offset (in data) of a tensor's first byte.
  uint64_t offset_of(const std::string& tensor) const { return header.at(tensor).at("data_offsets")[0].get<uint64_t>(); }
};

// A fresh directory under /tmp removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = fs::temp_directory_path() /
            ("qwen3-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

  // Copies the model files (not the tokenizer) of `from` into a subdirectory.
  fs::path copy_model(const fs::path& from, const std::string& name = "model") const {
    fs::path to = path_ / name;
    fs::create_directories(to);
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
      if (fs::exists(from / f)) fs::copy_file(from / f, to / f);
    return to;
  }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  fs::path path_;
};

}  // namespace qwen3::test
