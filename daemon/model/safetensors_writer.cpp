#include "model/safetensors_writer.h"

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qwen3 {

size_t TensorDecl::nbytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<TensorDecl> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path) {
  // nlohmann's ordered_json keeps declaration order, which keeps offsets ascending
  // in the file as readers expect.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t n = t.nbytes();
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  expected_bytes_ = offset;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // keep the data 8-byte aligned

  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) throw Error(path + ": cannot create: " + std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 22);
  uint8_t len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  if (std::fwrite(len, 1, 8, file_) != 8 || std::fwrite(text.data(), 1, text.size(), file_) != text.size())
    throw Error(path + ": write failed: " + std::strerror(errno));
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) std::fclose(file_);
}

void SafetensorsWriter::write(const void* data, size_t n) {
  if (!file_) throw Error(path_ + ": write after finish");
  if (written_bytes_ + n > expected_bytes_)
    throw Error(path_ + ": more tensor bytes written than declared (" + std::to_string(expected_bytes_) + ")");
  if (n && std::fwrite(data, 1, n, file_) != n) throw Error(path_ + ": write failed: " + std::strerror(errno));
  written_bytes_ += n;
}

void SafetensorsWriter::finish() {
  if (!file_) return;
  if (written_bytes_ != expected_bytes_)
    throw Error(path_ + ": " + std::to_string(written_bytes_) + " tensor bytes written, " +
                std::to_string(expected_bytes_) + " declared");
  int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) throw Error(path_ + ": close failed: " + std::strerror(errno));
}

}  // namespace qwen3
