#include "tokenizer/utf8.h"

namespace qwen3::utf8 {
namespace {

// Allowed range of the second byte after a lead byte (Unicode Table 3-7).
struct LeadInfo {
  uint8_t length;  // 0 = not a valid lead byte
  uint8_t second_lo;
  uint8_t second_hi;
};

constexpr LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes of the sequence at i are valid (1 = just the lead byte); the
// full length when complete.
size_t valid_prefix(std::string_view s, size_t i, const LeadInfo& info) {
  size_t n = 1;
  while (n < info.length && i + n < s.size()) {
    uint8_t c = static_cast<uint8_t>(s[i + n]);
    uint8_t lo = n == 1 ? info.second_lo : 0x80;
    uint8_t hi = n == 1 ? info.second_hi : 0xBF;
    if (c < lo || c > hi) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t sequence_length(std::string_view s, size_t i, bool* truncated) {
  if (truncated) *truncated = false;
  LeadInfo info = lead_info(static_cast<uint8_t>(s[i]));
  if (info.length == 0) return 0;
  if (info.length == 1) return 1;
  size_t n = valid_prefix(s, i, info);
  if (n == info.length) return n;
  if (truncated && i + n == s.size()) *truncated = true;
  return 0;
}

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  const size_t size = s.size();
  while (i < size) {
    // Fast path over ASCII, eight bytes at a time.
    while (i + 8 <= size) {
      uint64_t word;
      __builtin_memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= size) break;
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void append_lossy(std::string& out, std::string_view s) {
  size_t i = 0;
  size_t run_start = 0;  // start of the pending valid run, copied in one go
  while (i < s.size()) {
    uint8_t b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    LeadInfo info = lead_info(b);
    if (info.length == 0) {
      out.append(s.substr(run_start, i - run_start));
      out.append(replacement_character);
      ++i;
      run_start = i;
      continue;
    }
    size_t n = valid_prefix(s, i, info);
    if (n == info.length) {
      i += n;
      continue;
    }
    // A maximal subpart: the lead byte and the continuation bytes that fit.
    out.append(s.substr(run_start, i - run_start));
    out.append(replacement_character);
    i += n;
    run_start = i;
  }
  out.append(s.substr(run_start));
}

size_t incomplete_tail(std::string_view s) {
  // A sequence is at most 4 bytes: look for its lead within the last 3 bytes.
  size_t lookback = s.size() < 3 ? s.size() : 3;
  for (size_t k = 1; k <= lookback; ++k) {
    size_t i = s.size() - k;
    uint8_t b = static_cast<uint8_t>(s[i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking left
    bool truncated = false;
    sequence_length(s, i, &truncated);
    return truncated ? k : 0;
  }
  return 0;
}

char32_t next_code_point(std::string_view s, size_t& i) {
  uint8_t b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  if (b0 < 0xE0) {
    char32_t cp = ((b0 & 0x1F) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3F);
    i += 2;
    return cp;
  }
  if (b0 < 0xF0) {
    char32_t cp = ((b0 & 0x0F) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3F) << 6) |
                  (static_cast<uint8_t>(s[i + 2]) & 0x3F);
    i += 3;
    return cp;
  }
  char32_t cp = ((b0 & 0x07) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3F) << 12) |
                ((static_cast<uint8_t>(s[i + 2]) & 0x3F) << 6) |
                (static_cast<uint8_t>(s[i + 3]) & 0x3F);
  i += 4;
  return cp;
}

char32_t last_code_point(std::string_view s, size_t* start) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  if (start) *start = i;
  return next_code_point(s, i);
}

void append_code_point(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace qwen3::utf8
