#include "verify/fixtures.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qwen3::verify {

std::optional<std::string> decode_hex(const std::string& hex, std::string* error) {
  std::string out;
  int pending = -1;
  size_t i = 0;
  if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) i = 2;
  for (; i < hex.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(hex[i]);
    if (std::isspace(c) || c == ':') {
      if (pending >= 0) {
        if (error) *error = "separator inside a byte at position " + std::to_string(i);
        return std::nullopt;
      }
      continue;
    }
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else {
      if (error) {
        std::string shown = std::isprint(c) ? std::string(1, static_cast<char>(c)) : "\\x" + encode_hex(std::string(1, static_cast<char>(c)));
        *error = "invalid hex character '" + shown + "' at position " + std::to_string(i);
      }
      return std::nullopt;
    }
    if (pending < 0) {
      pending = v;
    } else {
      out.push_back(static_cast<char>(pending * 16 + v));
      pending = -1;
    }
  }
  if (pending >= 0) {
    if (error) *error = "odd number of hex digits";
    return std::nullopt;
  }
  return out;
}

std::string encode_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string xdp_action_name(uint32_t action) {
  static const char* names[] = {"XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT"};
  if (action < 5) return names[action];
  // Large values are usually (part of) a kernel pointer a root-verified
  // program may return: not worth echoing to the caller.
  if (action > 0xffff) return "UNKNOWN(>0xffff)";
  return "UNKNOWN(" + std::to_string(action) + ")";
}

std::optional<uint32_t> parse_xdp_action(const std::string& name) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (n.rfind("XDP_", 0) != 0) n = "XDP_" + n;
  for (uint32_t a = 0; a < 5; ++a)
    if (xdp_action_name(a) == n) return a;
  return std::nullopt;
}

std::vector<Fixture> parse_fixtures_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw invalid_argument(std::string("fixtures: not valid JSON: ") + e.what());
  }
  if (j.is_object() && j.contains("fixtures")) j = j["fixtures"];
  if (!j.is_array()) throw invalid_argument("fixtures: expected a JSON array of {name, packet_hex, expected_action}");
  std::vector<Fixture> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string where = "fixtures[" + std::to_string(i) + "]";
    if (!e.is_object()) throw invalid_argument(where + ": expected an object");
    auto get = [&](const char* key, bool required) -> std::string {
      if (!e.contains(key)) {
        if (required) throw invalid_argument(where + ": missing \"" + key + "\"");
        return "";
      }
      if (!e[key].is_string()) throw invalid_argument(where + ": \"" + key + "\" must be a string");
      return e[key].get<std::string>();
    };
    Fixture f;
    f.name = get("name", false);
    if (f.name.empty()) f.name = "fixture" + std::to_string(i);
    f.packet_hex = get("packet_hex", true);
    f.expected_action = get("expected_action", true);
    f.expected_packet_hex = get("expected_packet_hex", false);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace qwen3::verify
