// Streaming decode: bytes of a character split across tokens are held back
// until the character completes, so every emitted chunk is valid UTF-8 and the
// concatenation of all chunks equals Tokenizer::decode of all ids.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace qwen3 {

StreamDecoder::StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special)
    : tok_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  std::string bytes = tok_->token_bytes(id);  // throws on an unknown id, leaving state unchanged
  if (skip_special_ && tok_->is_special(id)) return {};
  pending_ += bytes;
  // Hold a valid-but-unfinished character at the end; everything before it is
  // final (invalid bytes there cannot become valid by appending more).
  size_t held = utf8::incomplete_tail(pending_);
  std::string_view ready(pending_.data(), pending_.size() - held);
  std::string out;
  utf8::append_lossy(out, ready);
  pending_.erase(0, ready.size());
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  utf8::append_lossy(out, pending_);
  pending_.clear();
  return out;
}

}  // namespace qwen3
