// Text made from the key table (config_keys.cpp): the commented configuration
// file (conf/qwen3-bpfd.conf, `qwen3-bpfd --print-config`), the key table of
// docs/daemon.md and the --help line of a key's flag.
#pragma once

#include <string>

#include "service/config_keys.h"

namespace qwen3 {

// The commented configuration file: every key commented out at its default,
// with its doc, allowed values and [reload] or [restart].
std::string config_file_text();
// A Markdown table of the keys (those of sections whose title starts with
// `section`; all for ""): key, flag, values, default, SIGHUP, doc.
std::string config_keys_markdown(const std::string& section = "");
// The --help text of the flag that sets `key`.
std::string flag_help(const ConfigKey& key);
// "reload" or "restart".
const char* on_reload_word(OnReload on_reload);

}  // namespace qwen3
