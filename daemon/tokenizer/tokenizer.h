// Qwen3's tokenizer: an exact reimplementation of what Hugging Face
// `tokenizers` does with tokenizer.json (NFC, Split regex, byte-level BPE,
// added/special tokens), plus the chat template of tokenizer_config.json.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant"
  std::string content;
};

class Tokenizer {
 public:
  // Reads <dir>/tokenizer.json and <dir>/tokenizer_config.json.
  // Throws qwen3::Error naming the file and key on anything malformed.
  static std::shared_ptr<const Tokenizer> load(const std::string& dir);
  ~Tokenizer();

  // Throws qwen3::Error(invalid_argument) on invalid UTF-8.
  // parse_special=false treats "<|im_start|>" and the other tokens flagged
  // special as plain text; non-special added tokens (<think>, <tool_call>, ...)
  // are still recognised, as HF does with split_special_tokens=True.
  // Thread-safe: concurrent calls on one Tokenizer are fine.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // Ids out of range are an error (invalid_argument). Invalid UTF-8 produced by
  // a partial byte sequence is replaced with U+FFFD, as HF does.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The token's own string as in the vocabulary (byte-level alphabet).
  std::string piece(int32_t id) const;
  // The raw bytes a token stands for.
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  int32_t vocab_size() const;   // highest id + 1, added tokens included
  // eos_token / pad_token of tokenizer_config.json (Qwen3: <|im_end|>, <|endoftext|>).
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;

  // Renders the conversation as tokenizer_config.json's Qwen3 template does.
  // Roles: system, user, assistant, tool (tool_calls / tools are not supported).
  // Throws invalid_argument on an empty conversation or an unknown role.
  std::string apply_chat_template(std::span<const ChatMessage> messages,
                                  bool add_generation_prompt = true,
                                  bool enable_thinking = true) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into text without ever emitting half a UTF-8 character:
// bytes of an incomplete character are held until it completes.
class StreamDecoder {
 public:
  explicit StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special = false);
  // The text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is still held, with incomplete sequences replaced by U+FFFD.
  std::string flush();

 private:
  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace qwen3
