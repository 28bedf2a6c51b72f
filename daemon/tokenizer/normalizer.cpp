#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "common/error.h"

namespace qwen3 {
namespace {

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

Normalizer::Normalizer(Kind kind) : kind_(kind) {
  if (kind_ == Kind::nfc) {
    UErrorCode status = U_ZERO_ERROR;
    nfc_ = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status) || !nfc_) {
      throw Error(std::string("ICU NFC normalizer unavailable: ") + u_errorName(status));
    }
  }
}

std::string_view Normalizer::normalize(std::string_view text, std::string& storage) const {
  if (kind_ == Kind::none || is_ascii(text)) return text;  // ASCII is always NFC
  const auto* nfc = static_cast<const icu::Normalizer2*>(nfc_);
  icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return text;
  status = U_ZERO_ERROR;
  storage.clear();
  icu::StringByteSink<std::string> sink(&storage, static_cast<int32_t>(text.size()));
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw Error(std::string("NFC normalization failed: ") + u_errorName(status));
  return storage;
}

}  // namespace qwen3
