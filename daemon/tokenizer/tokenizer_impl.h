// Internal state of qwen3::Tokenizer (built once by the loader, then read-only
// except for the BPE word cache, which is internally synchronised).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace qwen3 {

struct Tokenizer::Impl {
  enum class IdKind : uint8_t { unused, vocab, added, special };

  std::string dir;
  std::vector<std::string> pieces;     // id -> vocabulary string (byte-level alphabet)
  std::vector<std::string> bytes;      // id -> raw bytes the id decodes to
  std::vector<IdKind> kinds;           // id -> what the id is
  std::unordered_map<std::string, int32_t> piece_to_id;
  std::unique_ptr<BpeModel> bpe;
  Normalizer normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized=false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized=true
  std::vector<AddedToken> added_tokens;

  std::optional<std::string> chat_template;  // from tokenizer_config.json
  bool chat_template_is_qwen3 = false;       // the template apply_chat_template implements
  std::optional<int32_t> eos_id;
  std::optional<int32_t> pad_id;

  bool valid_id(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < kinds.size() && kinds[id] != IdKind::unused;
  }
  void check_id(int32_t id) const;
  // Appends the ids of valid UTF-8 `text`.
  void encode_into(std::string_view text, bool parse_special, std::vector<int32_t>& ids) const;
  void encode_section(std::string_view text, bool parse_special, std::vector<int32_t>& ids) const;
};

// Loads <dir>/tokenizer.json and <dir>/tokenizer_config.json (tokenizer_loader.cpp).
std::unique_ptr<Tokenizer::Impl> load_tokenizer_impl(const std::string& dir);

// The Qwen3 chat template of tokenizer_config.json, in C++ (chat_template.cpp).
std::string render_qwen3_chat(std::span<const ChatMessage> messages, bool add_generation_prompt,
                              bool enable_thinking);
// True when `jinja` is the Qwen3 template render_qwen3_chat implements.
bool is_qwen3_chat_template(const std::string& jinja);

}  // namespace qwen3
