#include "tokenizer/tokenizer.h"

#include "common/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace qwen3 {

void Tokenizer::Impl::check_id(int32_t id) const {
  if (!valid_id(id)) {
    throw invalid_argument("token id " + std::to_string(id) + " is not in the tokenizer (valid ids: 0.." +
                           std::to_string(kinds.size() - 1) + ")");
  }
}

void Tokenizer::Impl::encode_into(std::string_view text, bool parse_special,
                                  std::vector<int32_t>& ids) const {
  if (raw_matcher.empty()) {
    encode_section(text, parse_special, ids);
    return;
  }
  std::vector<AddedTokenMatcher::Piece> pieces;
  raw_matcher.split(text, parse_special, pieces);
  for (const auto& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
    } else {
      encode_section(text.substr(p.begin, p.end - p.begin), parse_special, ids);
    }
  }
}

void Tokenizer::Impl::encode_section(std::string_view text, bool parse_special,
                                     std::vector<int32_t>& ids) const {
  std::string storage;
  std::string_view normalized = normalizer.normalize(text, storage);
  auto tokenize_words = [&](std::string_view part) {
    pre_tokenizer->split(part, [&](std::string_view word) { bpe->encode_word(word, ids); });
  };
  if (normalized_matcher.empty()) {
    tokenize_words(normalized);
    return;
  }
  std::vector<AddedTokenMatcher::Piece> pieces;
  normalized_matcher.split(normalized, parse_special, pieces);
  for (const auto& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
    } else {
      tokenize_words(normalized.substr(p.begin, p.end - p.begin));
    }
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::string& dir) {
  return std::shared_ptr<const Tokenizer>(new Tokenizer(load_tokenizer_impl(dir)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  size_t bad = utf8::find_invalid(text);
  if (bad != std::string_view::npos) {
    throw invalid_argument("text to tokenize is not valid UTF-8 (first bad byte at offset " +
                           std::to_string(bad) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  impl_->encode_into(text, parse_special, ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw;
  for (int32_t id : ids) {
    impl_->check_id(id);
    if (skip_special && impl_->kinds[id] == Impl::IdKind::special) continue;
    raw += impl_->bytes[id];
  }
  if (utf8::find_invalid(raw) == std::string::npos) return raw;
  std::string text;
  text.reserve(raw.size() + 8);
  utf8::append_lossy(text, raw);
  return text;
}

std::string Tokenizer::piece(int32_t id) const {
  impl_->check_id(id);
  return impl_->pieces[id];
}

std::string Tokenizer::token_bytes(int32_t id) const {
  impl_->check_id(id);
  return impl_->bytes[id];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->piece_to_id.find(std::string(token));
  if (it == impl_->piece_to_id.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_special(int32_t id) const {
  return impl_->valid_id(id) && impl_->kinds[id] == Impl::IdKind::special;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->kinds.size()); }

std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos_id; }
std::optional<int32_t> Tokenizer::pad_token_id() const { return impl_->pad_id; }

std::string Tokenizer::apply_chat_template(std::span<const ChatMessage> messages,
                                           bool add_generation_prompt, bool enable_thinking) const {
  if (!impl_->chat_template) {
    throw failed_precondition(impl_->dir + "/tokenizer_config.json: key 'chat_template' missing; "
                              "cannot format a conversation");
  }
  return render_qwen3_chat(messages, add_generation_prompt, enable_thinking);
}

}  // namespace qwen3
