// The Qwen3 chat template of tokenizer_config.json, transcribed from its Jinja
// source branch by branch (message tool_calls and the `tools` preamble are
// not supported). Comments quote the Jinja they implement.
#include <string_view>

#include "common/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace qwen3 {
namespace {

// Python's str.lstrip('\n') / rstrip('\n') / strip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_newlines(std::string_view s) { return rstrip_newlines(lstrip_newlines(s)); }

// s.split(sep)[-1] and s.split(sep)[0].
std::string_view after_last(std::string_view s, std::string_view sep) {
  size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}
std::string_view before_first(std::string_view s, std::string_view sep) {
  size_t at = s.find(sep);
  return at == std::string_view::npos ? s : s.substr(0, at);
}

bool is_tool_response(std::string_view s) {
  constexpr std::string_view open = "<tool_response>";
  constexpr std::string_view close = "</tool_response>";
  return s.starts_with(open) && s.ends_with(close);
}

}  // namespace

std::string render_qwen3_chat(std::span<const ChatMessage> messages, bool add_generation_prompt,
                              bool enable_thinking) {
  if (messages.empty()) throw invalid_argument("chat template: the conversation has no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      throw invalid_argument("chat template: message " + std::to_string(i) + " has role '" + role +
                             "' (expected system, user, assistant or tool)");
    }
  }
  std::string out;
  // {%- if messages[0].role == 'system' %} <|im_start|>system\n + content + <|im_end|>\n
  if (messages[0].role == "system") {
    out += "<|im_start|>system\n";
    out += messages[0].content;
    out += "<|im_end|>\n";
  }
  // last_query_index: the last user message that is not a tool response.
  size_t last_query_index = messages.size() - 1;
  for (size_t k = messages.size(); k-- > 0;) {
    if (messages[k].role == "user" && !is_tool_response(messages[k].content)) {
      last_query_index = k;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool first = i == 0;
    const bool last = i + 1 == messages.size();
    if (m.role == "user" || (m.role == "system" && !first)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      // {%- if '</think>' in message.content %}
      if (content.find("</think>") != std::string_view::npos) {
        std::string_view full = m.content;
        content = lstrip_newlines(after_last(full, "</think>"));
        reasoning = lstrip_newlines(after_last(rstrip_newlines(before_first(full, "</think>")), "<think>"));
      }
      // {%- if loop.index0 > ns.last_query_index %}
      //   {%- if loop.last or (not loop.last and reasoning_content) %} ... think block
      if (i > last_query_index && (last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n";
        out += strip_newlines(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_newlines(content);
      } else {
        out += "<|im_start|>assistant\n";
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (first || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n";
      out += m.content;
      out += "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // A leading system message was rendered before the loop.
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    // {%- if enable_thinking is defined and enable_thinking is false %}
    if (!enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace qwen3
