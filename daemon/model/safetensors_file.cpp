#include "model/safetensors_file.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qwen3 {
namespace {

using nlohmann::json;

bool parse_dtype(const std::string& s, DType& out) {
  if (s == "BF16") { out = DType::bf16; return true; }
  if (s == "F16") { out = DType::f16; return true; }
  if (s == "F32") { out = DType::f32; return true; }
  return false;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const size_t size = file_.size();
  if (size < 8)
    throw invalid_argument(path + ": truncated safetensors file (" + std::to_string(size) +
                           " bytes, the 8-byte header length is missing)");
  const uint64_t header_len = read_u64_le(file_.data());
  if (header_len > kMaxSafetensorsHeaderBytes)
    throw invalid_argument(path + ": safetensors header length " + std::to_string(header_len) +
                           " bytes exceeds the limit of " + std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  if (header_len > size - 8)
    throw invalid_argument(path + ": truncated safetensors file: header claims " + std::to_string(header_len) +
                           " bytes but only " + std::to_string(size - 8) + " follow the length field");
  const uint8_t* header_begin = file_.data() + 8;
  json header;
  try {
    header = json::parse(header_begin, header_begin + header_len);
  } catch (const json::exception& e) {
    throw invalid_argument(path + ": safetensors header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw invalid_argument(path + ": safetensors header is not a JSON object");

  const uint8_t* data_begin = header_begin + header_len;
  const uint64_t data_size = size - 8 - header_len;

  struct Range { uint64_t begin, end; size_t index; };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) throw invalid_argument(path + ": '__metadata__' is not a JSON object");
      continue;
    }
    const std::string where = path + ": tensor '" + name + "': ";
    const json& e = *it;
    if (!e.is_object()) throw invalid_argument(where + "header entry is not a JSON object");
    auto dt = e.find("dtype");
    auto sh = e.find("shape");
    auto off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string()) throw invalid_argument(where + "missing or non-string 'dtype'");
    if (sh == e.end() || !sh->is_array()) throw invalid_argument(where + "missing or non-list 'shape'");
    if (off == e.end() || !off->is_array() || off->size() != 2)
      throw invalid_argument(where + "'data_offsets' must be a list [begin, end]");

    TensorView t;
    t.name = name;
    t.file = path;
    if (!parse_dtype(dt->get<std::string>(), t.dtype))
      throw invalid_argument(where + "dtype " + dt->get<std::string>() + " is not supported (BF16, F16 or F32)");
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) throw invalid_argument(where + "shape " + sh->dump() + " has a non-integer or negative dimension");
      uint64_t v = d.get<uint64_t>();
      if (v > (1ull << 40) || (v && numel > (1ull << 40) / v))
        throw invalid_argument(where + "shape " + sh->dump() + " is absurdly large");
      numel *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      throw invalid_argument(where + "data_offsets " + off->dump() + " must be non-negative integers");
    uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end) throw invalid_argument(where + "data_offsets " + off->dump() + " end before begin");
    if (end > data_size)
      throw invalid_argument(where + "data_offsets " + off->dump() + " run past the end of the data (" +
                             std::to_string(data_size) + " bytes; file truncated?)");
    if (end - begin != numel * dtype_size(t.dtype))
      throw invalid_argument(where + "data_offsets " + off->dump() + " hold " + std::to_string(end - begin) +
                             " bytes but shape " + sh->dump() + " of " + dtype_name(t.dtype) + " needs " +
                             std::to_string(numel * dtype_size(t.dtype)));
    t.data = data_begin + begin;
    t.nbytes = end - begin;
    ranges.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }

  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  const Range* furthest = nullptr;  // the non-empty range reaching furthest so far
  for (const Range& cur : ranges) {
    if (cur.end == cur.begin) continue;
    if (furthest && cur.begin < furthest->end)
      throw invalid_argument(path + ": tensor '" + tensors_[cur.index].name + "' data [" + std::to_string(cur.begin) +
                             ", " + std::to_string(cur.end) + ") overlaps tensor '" + tensors_[furthest->index].name +
                             "' [" + std::to_string(furthest->begin) + ", " + std::to_string(furthest->end) + ")");
    if (!furthest || cur.end > furthest->end) furthest = &cur;
  }
  // The weights are read front to back once by the NaN scan and by converters.
  if (file_.size() > 0)
    ::madvise(const_cast<uint8_t*>(file_.data()), file_.size(), MADV_WILLNEED);
}

}  // namespace qwen3
