// `qwen3-bpf udp --to HOST:PORT [--session ID] [-n MAX_TOKENS] PROMPT...`: a
// client of the daemon's XDP endpoint (docs/kernel-clients.md). It sends one
// generate datagram, then polls; the XDP program answers every poll in the
// kernel from the session's result slot, and the text streams to stdout.
// Ctrl-C sends a cancel datagram and waits for the generation to end.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "cli_error.h"
#include "command.h"
#include "interrupt.h"
#include "kclient_abi.h"

namespace qwen3::cli {

namespace {

using Clock = std::chrono::steady_clock;

const char* error_text(uint32_t e) {
  switch (e) {
    case QK_E_INVALID: return "the daemon refused the request's values (ids, UTF-8, sampling or length)";
    case QK_E_BUSY: return "the daemon's queue of kernel-client requests is full; retry later";
    case QK_E_LIMIT: return "a session or KV budget is reached (max_sessions, kv_budget_mib, per-uid quotas)";
    case QK_E_NOT_FOUND: return "the session belongs to another user";
    case QK_E_UNAVAILABLE: return "the daemon is loading or stopping";
    case QK_E_SESSION_BUSY: return "another request is running on this session";
    case QK_E_LOST: return "answers were lost (polled too late)";
    default: return "internal error in the daemon";
  }
}

int open_socket(const std::string& to) {
  const auto colon = to.rfind(':');
  if (colon == std::string::npos || colon == 0) throw usage_error("--to must be HOST:PORT (got '" + to + "')");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(to.substr(0, colon).c_str(), to.substr(colon + 1).c_str(), &hints, &res) != 0 || !res)
    throw usage_error("--to: cannot resolve '" + to + "' to an IPv4 address and port");
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
  freeaddrinfo(res);
  if (!ok) throw CliError("udp: cannot reach " + to + ": " + std::strerror(errno), kExitNoDaemon);
  return fd;
}

uint32_t q16(double v) { return static_cast<uint32_t>(std::lround(v * 65536.0)); }

qk_hdr header(uint8_t kind, uint32_t request_id, const std::string& session) {
  qk_hdr h{};
  h.magic = QK_MAGIC;
  h.version = QK_VERSION;
  h.kind = kind;
  h.request_id = request_id;
  std::memcpy(h.session, session.data(), session.size());
  return h;
}

// The generate datagram: the fixed part and the prompt's bytes.
std::string generate_datagram(const Command& cmd, uint32_t request_id, const std::string& session,
                              const std::string& prompt) {
  const Args& a = cmd.args();
  qk_generate g{};
  g.hdr = header(QK_GENERATE, request_id, session);
  g.hdr.flags = QK_F_TEXT | (a.has("replace") ? 0 : QK_F_APPEND);
  g.max_tokens = static_cast<uint16_t>(a.get_int("max-tokens", 1, QK_MAX_TOKENS).value_or(64));
  if (prompt.empty() || prompt.size() > QK_MAX_PROMPT_BYTES)
    throw usage_error("udp: the prompt must be 1.." + std::to_string(QK_MAX_PROMPT_BYTES) + " bytes");
  g.prompt_len = static_cast<uint16_t>(prompt.size());
  std::memcpy(g.prompt, prompt.data(), prompt.size());
  qk_sampling& s = g.sampling;
  s.temperature_q16 = s.top_p_q16 = s.min_p_q16 = s.repetition_penalty_q16 = s.top_k = QK_UNSET;
  if (auto t = a.get_double("temperature", 0, 100)) s.temperature_q16 = q16(*t);
  if (auto p = a.get_double("top-p", 0, 1)) s.top_p_q16 = q16(*p);
  if (auto k = a.get_int("top-k", 0, 1 << 20)) s.top_k = static_cast<uint32_t>(*k);
  if (auto seed = a.get_int("seed", 0, INT64_MAX)) {
    s.seed_set = 1;
    s.seed = static_cast<uint64_t>(*seed);
  }
  return std::string(reinterpret_cast<const char*>(&g), QK_GENERATE_FIXED + prompt.size());
}

void send_all(int fd, const void* p, size_t n) {
  if (send(fd, p, n, 0) != static_cast<ssize_t>(n))
    throw CliError(std::string("udp: send failed: ") + std::strerror(errno), kExitFailed);
}

// The answer to one poll from `from`, or false after `wait_ms` without one.
bool poll_once(int fd, uint32_t request_id, const std::string& session, uint32_t from, int wait_ms, qk_answer& out) {
  qk_answer q{};
  q.hdr = header(QK_POLL, request_id, session);
  q.hdr.from_index = from;
  send_all(fd, &q, sizeof q);
  const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    const ssize_t n = recv(fd, &out, sizeof out, 0);
    if (n != static_cast<ssize_t>(sizeof out)) continue;  // ICMP errors, strays
    if (out.hdr.magic == QK_MAGIC && out.hdr.kind == QK_ANSWER && out.hdr.request_id == request_id &&
        out.hdr.from_index == from)
      return true;
  }
}

int run_udp(Command& cmd) {
  const Args& a = cmd.args();
  const auto to = a.get("to");
  if (!to) throw usage_error("udp: --to HOST:PORT is required");
  std::string prompt;
  for (const auto& w : a.positional()) prompt += (prompt.empty() ? "" : " ") + w;
  std::random_device rd;
  const std::string session = a.get_or("session", "udp-" + std::to_string(rd() % 1000000));
  if (session.empty() || session.size() > QK_SESSION_BYTES ||
      session.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != std::string::npos)
    throw usage_error("udp: --session must be 1..32 of [A-Za-z0-9_.-]");
  const double timeout_s = a.get_double("timeout", 0.1, 86400).value_or(30);
  uint32_t request_id = 0;
  while (request_id == 0) request_id = rd();

  const int fd = open_socket(*to);
  const std::string datagram = generate_datagram(cmd, request_id, session, prompt);
  std::atomic<bool> interrupted{false};
  CancelOnInterrupt guard([&interrupted] { interrupted = true; });
  send_all(fd, datagram.data(), datagram.size());

  uint32_t next = 0;
  auto last_progress = Clock::now();
  auto last_cancel = Clock::time_point{};
  int idle_ms = 1;
  qk_answer ans{};
  for (;;) {
    if (interrupted && Clock::now() - last_cancel > std::chrono::milliseconds(200)) {
      const qk_hdr c = header(QK_CANCEL, request_id, session);
      send_all(fd, &c, sizeof c);
      last_cancel = Clock::now();
    }
    const bool got = poll_once(fd, request_id, session, next, 200, ans);
    if (got && ans.status == QK_ST_OK) {
      for (unsigned i = 0; i < ans.count && i < QK_ANSWER_TOKENS; ++i)
        std::fwrite(ans.entries[i].text, 1, std::min<size_t>(ans.entries[i].text_len, QK_TOK_TEXT_BYTES), stdout);
      std::fflush(stdout);
      next += ans.count;
      if (ans.count) last_progress = Clock::now();
      if (ans.error == QK_E_LOST) throw CliError(std::string("udp: ") + error_text(QK_E_LOST), kExitFailed);
      if (ans.finish != QK_FINISH_NONE && next >= ans.produced) break;
    }
    if (std::chrono::duration<double>(Clock::now() - last_progress).count() > timeout_s)
      throw CliError("udp: no answer from " + *to + " for " + std::to_string(static_cast<int>(timeout_s)) +
                         " s (is udp_endpoint set to this port, is the daemon ready?)",
                     kExitNoDaemon);
    if (got && ans.status == QK_ST_OK && ans.count == QK_ANSWER_TOKENS) {
      idle_ms = 1;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
    idle_ms = std::min(idle_ms * 2, 16);
  }
  ::close(fd);
  std::printf("\n");
  if (a.has("stats"))
    std::fprintf(stderr, "session %s: finish %u, %u tokens, prompt %u (%u cached), positions %u\n", session.c_str(),
                 ans.finish, ans.tokens, ans.prompt_tokens, ans.cached_tokens, ans.positions);
  if (ans.finish == QK_FINISH_ERROR)
    throw CliError(std::string("udp: ") + error_text(ans.error), ans.error == QK_E_INVALID ? kExitUsage : kExitFailed);
  if (ans.finish == QK_FINISH_CANCELLED && interrupted) return kExitInterrupted;
  return kExitOk;
}

}  // namespace

CommandInfo udp_command() {
  return CommandInfo{"udp",
                     "generate through the daemon's UDP endpoint (XDP, docs/kernel-clients.md)",
                     "udp --to HOST:PORT [--session ID] [-n MAX_TOKENS] PROMPT...",
                     "Sends PROMPT (UTF-8; the daemon tokenizes it) to the XDP endpoint that udp_endpoint\n"
                     "configures and prints the answer as it streams; every poll is answered in the kernel.\n"
                     "With --session the session's KV is kept and reused between calls (the prompt is\n"
                     "appended to its history unless --replace). Ctrl-C cancels the generation.",
                     {
                         {"to", true, false, "HOST:PORT  the endpoint (e.g. 127.0.0.1:7070)"},
                         {"session", true, false, "ID  session (1..32 of [A-Za-z0-9_.-]); default: a new one"},
                         {"max-tokens", true, false, "N  tokens to generate at most (default 64)", 'n'},
                         {"temperature", true, false, "T  sampling temperature (0: greedy; default: the model's)"},
                         {"top-p", true, false, "P  nucleus sampling"},
                         {"top-k", true, false, "K  top-k sampling"},
                         {"seed", true, false, "S  seed of the draw"},
                         {"replace", false, false, "the prompt replaces the session's history (its common prefix is still reused)"},
                         {"timeout", true, false, "SECONDS  give up after this long without progress (default 30)"},
                         {"stats", false, false, "print the finish, tokens, cached tokens and positions to stderr"},
                     },
                     run_udp};
}

}  // namespace qwen3::cli
