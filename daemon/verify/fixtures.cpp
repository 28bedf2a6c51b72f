#include "verify/fixtures.h"

#include <algorithm>
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

namespace {

std::string u32_hex(uint64_t v, const std::string& where) {
  if (v > 0xffffffffull) throw invalid_argument(where + ": does not fit in 32 bits");
  std::string b(4, '\0');
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);  // BPF maps are host (little) endian
  return encode_hex(b);
}

// {"map", "key_hex"|"key_u32", "value_hex"|"value_u32"|"value_ifindex"}
MapEntry parse_map_entry(const nlohmann::json& e, const std::string& where, bool value_required) {
  if (!e.is_object()) throw invalid_argument(where + ": expected an object {map, key_hex, value_hex}");
  MapEntry m;
  if (!e.contains("map") || !e["map"].is_string() || e["map"].get<std::string>().empty())
    throw invalid_argument(where + ": missing \"map\" (the map's name)");
  m.map = e["map"].get<std::string>();
  auto part = [&](const char* what, bool required) -> std::string {
    const std::string hex = std::string(what) + "_hex", u32 = std::string(what) + "_u32";
    if (e.contains(hex)) {
      if (!e[hex].is_string()) throw invalid_argument(where + ": \"" + hex + "\" must be a string");
      return e[hex].get<std::string>();
    }
    if (e.contains(u32)) {
      if (!e[u32].is_number_unsigned()) throw invalid_argument(where + ": \"" + u32 + "\" must be a non-negative integer");
      return u32_hex(e[u32].get<uint64_t>(), where + "." + u32);
    }
    if (std::string(what) == "value" && e.contains("value_ifindex")) {
      // Only the loopback device: its index is 1 in every network namespace,
      // and naming host interfaces would tell the caller about the host.
      const auto& v = e["value_ifindex"];
      if (v.is_string() && (v == "lo" || v == "loopback")) return u32_hex(1, where);
      throw invalid_argument(where + ": \"value_ifindex\" may only be \"lo\" (the loopback device)");
    }
    if (required) throw invalid_argument(where + ": missing \"" + hex + "\" (or \"" + u32 + "\")");
    return "";
  };
  m.key_hex = part("key", true);
  m.value_hex = part("value", value_required);
  return m;
}

std::vector<MapEntry> parse_map_list(const nlohmann::json& j, const std::string& where, bool value_required) {
  if (!j.is_array()) throw invalid_argument(where + ": expected an array of {map, key_hex, value_hex}");
  std::vector<MapEntry> out;
  for (size_t i = 0; i < j.size(); ++i)
    out.push_back(parse_map_entry(j[i], where + "[" + std::to_string(i) + "]", value_required));
  return out;
}

}  // namespace

FixtureFile parse_fixture_file(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw invalid_argument(std::string("fixtures: not valid JSON: ") + e.what());
  }
  FixtureFile file;
  std::string list_key = "fixtures";
  if (j.is_object()) {
    if (j.contains("maps")) file.maps = parse_map_list(j["maps"], "maps", true);
    if (j.contains("task_id") && j["task_id"].is_string()) file.task_id = j["task_id"].get<std::string>();
    if (j.contains("validator")) {
      const auto& v = j["validator"];
      std::string type = v.is_object() && v.contains("type") && v["type"].is_string() ? v["type"].get<std::string>()
                         : v.is_string()                                           ? v.get<std::string>()
                                                                                   : "";
      if (type != "packet_action" && type != "packet_bytes" && type != "map_state")
        throw invalid_argument("fixtures: validator.type must be \"packet_action\", \"packet_bytes\" or \"map_state\"");
      file.validator = type;
    }
    if (j.contains("tests")) {
      list_key = "tests";
      j = j["tests"];
    } else if (j.contains("fixtures")) {
      j = j["fixtures"];
    }
  }
  if (!j.is_array())
    throw invalid_argument("fixtures: expected a JSON array of {name, packet_hex, expected_action}, "
                           "or an object with \"tests\" (BPF-Guardian format) or \"fixtures\"");
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string where = list_key + "[" + std::to_string(i) + "]";
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
    // The action by name, or by its number (0..4) as some harnesses write it.
    if (e.contains("expected_action") && e["expected_action"].is_number_unsigned())
      f.expected_action = xdp_action_name(static_cast<uint32_t>(std::min<uint64_t>(e["expected_action"].get<uint64_t>(), 0xffffffffu)));
    else
      f.expected_action = get("expected_action", true);
    // The expected output bytes, under the names fixture files use for them.
    for (const char* key : {"expected_packet_hex", "expected_output_hex", "expected_output_packet_hex"})
      if (f.expected_packet_hex.empty()) f.expected_packet_hex = get(key, false);
    if (e.contains("expected_maps")) f.expected_maps = parse_map_list(e["expected_maps"], where + ".expected_maps", true);
    f.validator = file.validator;
    file.fixtures.push_back(std::move(f));
  }
  return file;
}

std::vector<Fixture> parse_fixtures_json(const std::string& text) { return parse_fixture_file(text).fixtures; }

}  // namespace qwen3::verify
