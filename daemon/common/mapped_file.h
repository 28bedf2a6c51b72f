// A read-only memory mapping of a whole file, unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace qwen3 {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws qwen3::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string; throws qwen3::Error naming the path.
std::string read_text_file(const std::string& path);

}  // namespace qwen3
