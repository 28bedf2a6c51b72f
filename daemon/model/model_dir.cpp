#include "model/model_dir.h"

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "model/config_parser.h"
#include "model/safetensors_file.h"
#include "model/tensor_layout.h"
#include "model/weight_scan.h"

namespace qwen3 {

namespace fs = std::filesystem;

struct ModelDir::Impl {
  std::string path;
  std::string weights_file;  // model.safetensors or the index, for messages
  ModelConfig config;
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const TensorView*> tensors;
  bool lm_head_stored = false;
  size_t tensor_bytes = 0;
};

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Shard file names come from the index; keep them inside the directory.
std::string checked_shard_name(const std::string& name, const std::string& index_path, const std::string& tensor) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    throw invalid_argument(index_path + ": weight_map['" + tensor + "'] = \"" + name +
                           "\" is not a plain file name in the model directory");
  return name;
}

void load_sharded(ModelDir::Impl& m, const std::string& index_path) {
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(read_text_file(index_path));
  } catch (const nlohmann::json::exception& e) {
    throw invalid_argument(index_path + ": not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw invalid_argument(index_path + ": key 'weight_map' missing or not an object");
  std::map<std::string, std::string> tensor_to_shard;
  std::set<std::string> shards;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it->is_string())
      throw invalid_argument(index_path + ": weight_map['" + it.key() + "'] is not a file name");
    std::string shard = checked_shard_name(it->get<std::string>(), index_path, it.key());
    tensor_to_shard[it.key()] = shard;
    shards.insert(shard);
  }
  for (const std::string& shard : shards) {
    std::string shard_path = (fs::path(m.path) / shard).string();
    std::error_code ec;
    if (!fs::exists(shard_path, ec))
      throw not_found(index_path + ": shard " + shard + " listed in weight_map does not exist (" + shard_path + ")");
    m.files.push_back(std::make_unique<SafetensorsFile>(shard_path));
    const SafetensorsFile& f = *m.files.back();
    for (const TensorView& t : f.tensors()) {
      auto want = tensor_to_shard.find(t.name);
      if (want == tensor_to_shard.end() || want->second != shard)
        throw invalid_argument(f.path() + ": tensor '" + t.name + "' is not assigned to this shard by " + index_path);
      m.tensors[t.name] = &t;
    }
  }
  for (const auto& [name, shard] : tensor_to_shard)
    if (!m.tensors.count(name))
      throw invalid_argument(index_path + ": tensor '" + name + "' is listed in weight_map but missing from shard " +
                             shard);
}

void validate_tensors(ModelDir::Impl& m) {
  const ModelConfig& c = m.config;
  m.lm_head_stored = m.tensors.count("lm_head.weight") > 0;
  if (!c.tie_word_embeddings && !m.lm_head_stored)
    throw invalid_argument(m.weights_file + ": tensor 'lm_head.weight' is missing and config.json has tie_word_embeddings false");
  std::map<std::string, std::vector<int64_t>> expected;
  for (auto& spec : qwen3_tensor_layout(c, m.lm_head_stored)) expected[spec.name] = spec.shape;

  for (const auto& [name, t] : m.tensors)
    if (!expected.count(name))
      throw invalid_argument(t->file + ": unexpected tensor '" + name +
                             "' (not part of a Qwen3 checkpoint with this config.json)");
  for (const auto& [name, shape] : expected) {
    auto it = m.tensors.find(name);
    if (it == m.tensors.end())
      throw invalid_argument(m.weights_file + ": tensor '" + name + "' is missing (expected shape " + shape_str(shape) + ")");
    const TensorView& t = *it->second;
    if (t.shape != shape)
      throw invalid_argument(t.file + ": tensor '" + name + "' has shape " + shape_str(t.shape) +
                             " but config.json implies " + shape_str(shape));
  }
  m.tensor_bytes = 0;
  std::vector<const TensorView*> all;
  for (const auto& [name, t] : m.tensors) {
    m.tensor_bytes += t->nbytes;
    all.push_back(t);
  }
  check_finite(all, static_cast<int>(std::max(1u, std::min(4u, std::thread::hardware_concurrency()))));
}

}  // namespace

std::shared_ptr<const ModelDir> ModelDir::open(const std::string& dir) {
  auto m = std::make_unique<Impl>();
  m->path = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw not_found(dir + ": model directory does not exist");
  m->config = load_model_config(dir);

  const std::string single = (fs::path(dir) / "model.safetensors").string();
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  if (fs::exists(single, ec)) {
    m->weights_file = single;
    m->files.push_back(std::make_unique<SafetensorsFile>(single));
    for (const TensorView& t : m->files.back()->tensors()) m->tensors[t.name] = &t;
  } else if (fs::exists(index, ec)) {
    m->weights_file = index;
    load_sharded(*m, index);
  } else {
    throw not_found(dir + ": neither model.safetensors nor model.safetensors.index.json exists");
  }
  validate_tensors(*m);
  return std::shared_ptr<const ModelDir>(new ModelDir(std::move(m)));
}

ModelDir::ModelDir(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelDir::~ModelDir() = default;

const std::string& ModelDir::path() const { return impl_->path; }
const ModelConfig& ModelDir::config() const { return impl_->config; }

std::vector<std::string> ModelDir::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : impl_->tensors) out.push_back(name);
  return out;
}

bool ModelDir::has_tensor(const std::string& name) const { return impl_->tensors.count(name) > 0; }

const TensorView& ModelDir::tensor(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end()) throw not_found(impl_->path + ": no tensor '" + name + "'");
  return *it->second;
}

const TensorView& ModelDir::embed_tokens() const { return tensor("model.embed_tokens.weight"); }

const TensorView& ModelDir::lm_head() const {
  return impl_->lm_head_stored ? tensor("lm_head.weight") : embed_tokens();
}

const TensorView& ModelDir::layer_tensor(int layer, const std::string& suffix) const {
  return tensor(layer_tensor_name(layer, suffix));
}

size_t ModelDir::tensor_bytes() const { return impl_->tensor_bytes; }

}  // namespace qwen3
