// The key table (daemon/service/config_keys.cpp): every key parses, round-trips,
// enforces its range with the file and line, and reloads as the table says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/error.h"
#include "service/config.h"
#include "service/config_docs.h"
#include "service/config_keys.h"
#include "service/config_reload.h"

namespace qwen3 {
namespace {

// A scratch config file, removed at the end of the test.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& text)
      : path_(std::filesystem::temp_directory_path() / ("qwen3-config-test-" + std::to_string(getpid()) + ".conf")) {
    std::ofstream(path_) << text;
  }
  ~ScratchFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The message of the error `load_config_file` throws for `text`, or "" if it loads.
std::string load_error(const std::string& text) {
  ScratchFile f(text);
  DaemonConfig c;
  try {
    load_config_file(f.path(), c, true);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool integer_key(const ConfigKey& k) { return k.allowed.find("..") != std::string::npos; }
long range_end(const ConfigKey& k, bool high) {
  const auto dots = k.allowed.find("..");
  return std::stol(high ? k.allowed.substr(dots + 2) : k.allowed.substr(0, dots));
}

// A valid value other than the default, chosen from the key's allowed values.
std::string other_value(const ConfigKey& k) {
  if (integer_key(k)) {
    const long v = std::stol(k.default_value);
    return std::to_string(v < range_end(k, true) ? v + 1 : v - 1);
  }
  if (k.allowed.find('|') != std::string::npos) {
    std::string rest = k.allowed;
    for (size_t bar; !rest.empty(); rest = bar == std::string::npos ? "" : rest.substr(bar + 1)) {
      bar = rest.find('|');
      const std::string word = rest.substr(0, bar);
      if (word != k.default_value) return word;
    }
  }
  if (k.allowed.rfind("absolute path", 0) == 0) return "/tmp/qwen3-config-test/" + k.name;
  if (k.allowed.rfind("127.0.0.1:PORT", 0) == 0) return "127.0.0.1:8080";
  if (k.allowed.rfind("IFACE:PORT", 0) == 0) return "lo:7070";
  return "other-" + k.name;
}

TEST(Config, TheTableDefinesEachKeyOnceWithDocAndValues) {
  std::set<std::string> names, flags;
  for (const auto& k : config_keys()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " twice";
    if (!k.flag.empty()) {
      EXPECT_TRUE(flags.insert(k.flag).second) << k.flag << " twice";
    }
    EXPECT_FALSE(k.doc.empty()) << k.name;
    EXPECT_FALSE(k.allowed.empty()) << k.name;
    EXPECT_FALSE(k.section.empty()) << k.name;
    EXPECT_TRUE(k.parse && k.text && k.describe && k.copy) << k.name;
    EXPECT_EQ(find_config_key(k.name), &k);
  }
  EXPECT_EQ(find_config_key("max_sesions"), nullptr);
  // describe_config (--check) lists exactly the table's keys.
  std::set<std::string> described;
  for (const auto& [key, value] : describe_config(DaemonConfig{})) described.insert(key);
  EXPECT_EQ(described, names);
}

TEST(Config, DefaultsComeFromTheTable) {
  const DaemonConfig c;
  for (const auto& k : config_keys()) EXPECT_EQ(k.text(c), k.default_value) << k.name;
  // The built-in defaults the daemon always had.
  EXPECT_EQ(c.backend, "bpf");
  EXPECT_EQ(c.kv_bits, 8);
  EXPECT_EQ(c.max_sessions, 64);
  EXPECT_EQ(c.http_max_body_bytes, 4 << 20);
  EXPECT_EQ(c.socket_path, "/run/qwen3-bpfd/qwen3-bpfd.sock");
  EXPECT_TRUE(c.persist_sessions);
  EXPECT_FALSE(c.speculative.has_value());
  EXPECT_EQ(c.effective_http_socket(), "/run/qwen3-bpfd/http.sock");
}

TEST(Config, EveryKeyRoundTripsThroughAConfigFile) {
  // Each key at a value other than its default, one per line; read back, each says it again.
  std::string text;
  for (const auto& k : config_keys()) text += k.name + " = " + other_value(k) + "\n";
  ScratchFile f(text);
  DaemonConfig c;
  load_config_file(f.path(), c, true);
  for (const auto& k : config_keys()) {
    EXPECT_NE(other_value(k), k.default_value) << k.name;
    EXPECT_EQ(k.text(c), other_value(k)) << k.name;
    DaemonConfig again;
    k.parse(again, k.text(c), "again");
    EXPECT_EQ(k.text(again), k.text(c)) << k.name;
  }
}

TEST(Config, TheCommentedConfFileLoadsAtTheDefaults) {
  // conf/qwen3-bpfd.conf (config_file_text) with every `#key = default` line uncommented.
  std::string text, line;
  std::istringstream in(config_file_text());
  int keys = 0;
  while (std::getline(in, line)) {
    const auto eq = line.find(" =");
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' && eq != std::string::npos && find_config_key(line.substr(1, eq - 1))) {
      line = line.substr(1);
      ++keys;
    }
    text += line + "\n";
  }
  EXPECT_EQ(keys, static_cast<int>(config_keys().size()));
  ScratchFile f(text);
  DaemonConfig c;
  load_config_file(f.path(), c, true);
  EXPECT_EQ(describe_config(c), describe_config(DaemonConfig{}));
  for (const auto& k : config_keys())
    EXPECT_NE(text.find("[" + std::string(on_reload_word(k.on_reload)) + "]\n" + k.name + " ="), std::string::npos)
        << k.name << " lacks its [reload]/[restart] marking right above it";
}

TEST(Config, RangesAndValuesAreEnforcedNamingFileLineAndKey) {
  for (const auto& k : config_keys()) {
    std::vector<std::pair<std::string, std::string>> bad;  // value, expected message
    if (integer_key(k)) {
      const std::string range = "must be between " + std::to_string(range_end(k, false)) + " and " +
                                std::to_string(range_end(k, true));
      bad = {{std::to_string(range_end(k, true) + 1), range}, {std::to_string(range_end(k, false) - 1), range},
             {"lots", "must be an integer (got 'lots')"}};
    } else if (k.allowed.find('|') != std::string::npos) {
      bad = {{"nope", "must be "}};
    } else if (k.allowed.rfind("absolute path", 0) == 0) {
      bad = {{"relative/path", "must be an absolute path (got 'relative/path')"}};
    } else if (k.name == "http_listen") {
      bad = {{"0.0.0.0:80", "must be a loopback address"}};
    }
    for (const auto& [value, message] : bad) {
      const std::string error = load_error("# comment\n\n" + k.name + " = " + value + "\n");
      EXPECT_NE(error.find(":3: " + k.name + " " + message), std::string::npos)
          << k.name << " = " << value << " gave: " << error;
    }
  }
  EXPECT_NE(load_error("socket_path = /" + std::string(120, 's') + "\n").find("socket_path is longer than a Unix socket"),
            std::string::npos);
  EXPECT_NE(load_error("speculative = maybe\n").find(":1: speculative must be auto, on or off (got 'maybe')"),
            std::string::npos);
}

TEST(Config, AnUnknownKeyNamesEveryKnownOne) {
  const std::string error = load_error("max_sessions = 4\nmax_sesions = 4\n");
  EXPECT_NE(error.find(":2: unknown key 'max_sesions' (known: "), std::string::npos) << error;
  for (const auto& k : config_keys()) EXPECT_NE(error.find(k.name), std::string::npos) << k.name;
  EXPECT_NE(load_error("just words\n").find(":1: expected 'key = value'"), std::string::npos);
}

TEST(Config, AReloadAppliesLiveKeysAndKeepsRestartOnesInForce) {
  const DaemonConfig running;
  DaemonConfig on_disk;
  for (const auto& k : config_keys()) k.parse(on_disk, other_value(k), "test");
  const ReloadPlan plan = plan_reload(running, on_disk);
  std::set<std::string> applied, pending;
  for (const auto& c : plan.applied) applied.insert(c.key);
  for (const auto& c : plan.restart_needed) {
    pending.insert(c.key);
    const ConfigKey& k = *find_config_key(c.key);
    EXPECT_EQ(c.in_force, k.default_value);
    EXPECT_EQ(c.on_disk, other_value(k));
  }
  for (const auto& k : config_keys()) {
    const bool live = k.on_reload == OnReload::apply;
    EXPECT_EQ(applied.count(k.name), live ? 1u : 0u) << k.name;
    EXPECT_EQ(pending.count(k.name), live ? 0u : 1u) << k.name;
    EXPECT_EQ(k.text(plan.next), live ? other_value(k) : k.default_value) << k.name;
  }
  // Issue 22 defect 6: these three were silently dropped by a reload.
  for (const char* key : {"kv_bits", "prefill_chunk", "persist_sessions"}) EXPECT_EQ(pending.count(key), 1u) << key;
  // An unchanged file changes nothing; one changed back clears what was pending.
  const ReloadPlan same = plan_reload(plan.next, plan.next);
  EXPECT_TRUE(same.applied.empty());
  EXPECT_TRUE(same.restart_needed.empty());
  EXPECT_EQ(change_text({"admin_group", "", "wheel"}), "admin_group \"\" -> wheel");
}

}  // namespace
}  // namespace qwen3
