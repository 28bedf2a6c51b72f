#include "line_reader.h"

#include <fcntl.h>
#include <histedit.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdlib>
#include <cwchar>

#include "interrupt.h"

namespace qwen3::cli {

LineReader::LineReader(bool terminal) : terminal_(terminal) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  if (!terminal_) return;
  std::setlocale(LC_CTYPE, "");
  el_ = el_init("qwen3-bpf", stdin, stderr, stderr);
  hist_ = history_init();
  HistEvent ev;
  history(hist_, &ev, H_SETSIZE, 1000);
  history(hist_, &ev, H_SETUNIQUE, 1);
  if (const char* home = std::getenv("HOME"); home && *home) {
    history_file_ = std::string(home) + "/.qwen3_bpf_history";
    history(hist_, &ev, H_LOAD, history_file_.c_str());
  }
  el_set(el_, EL_EDITOR, "emacs");
  el_set(el_, EL_HIST, history, hist_);
  el_set(el_, EL_CLIENTDATA, this);
  el_set(el_, EL_PROMPT, +[](EditLine* el) -> char* {
    void* data = nullptr;
    el_get(el, EL_CLIENTDATA, &data);
    return const_cast<char*>(static_cast<LineReader*>(data)->prompt_.c_str());
  });
  // libedit's character source: next_byte() (so Ctrl-C can wake it), decoded
  // with the locale's multibyte encoding.
  el_set(el_, EL_GETCFN, +[](EditLine* el, wchar_t* out) -> int {
    void* data = nullptr;
    el_get(el, EL_CLIENTDATA, &data);
    auto* self = static_cast<LineReader*>(data);
    std::mbstate_t state{};
    for (;;) {
      int b = self->next_byte();
      if (b < 0) return 0;  // end of input or Ctrl-C: el_gets returns what it has, or nothing
      char c = static_cast<char>(b);
      size_t n = std::mbrtowc(out, &c, 1, &state);
      if (n == static_cast<size_t>(-2)) continue;  // inside a multibyte character
      if (n == static_cast<size_t>(-1)) {
        state = {};
        *out = static_cast<unsigned char>(c);  // not the locale's encoding: pass the byte on
      }
      return 1;
    }
  });
  el_source(el_, nullptr);  // ~/.editrc, if any
}

LineReader::~LineReader() {
  if (hist_) {
    HistEvent ev;
    if (!history_file_.empty()) history(hist_, &ev, H_SAVE, history_file_.c_str());
    history_end(hist_);
  }
  if (el_) el_end(el_);
  for (int fd : wake_)
    if (fd >= 0) close(fd);
}

int LineReader::next_byte() {
  if (buf_pos_ < buf_len_) return static_cast<unsigned char>(buf_[buf_pos_++]);
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, wake_[0] >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (fds[1].revents & POLLIN) {
      interrupted_ = true;
      return -2;
    }
    ssize_t n = ::read(STDIN_FILENO, buf_, terminal_ ? 1 : sizeof buf_);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf_len_ = static_cast<size_t>(n);
    buf_pos_ = 1;
    return static_cast<unsigned char>(buf_[0]);
  }
}

std::optional<std::string> LineReader::read(const std::string& prompt) {
  if (interrupted_) return std::nullopt;
  // Ctrl-C while waiting for input wakes the poll in next_byte().
  const int wake = wake_[1];
  CancelOnInterrupt guard([wake] { (void)!write(wake, "x", 1); });
  if (el_) {
    prompt_ = prompt;
    int count = 0;
    const char* line = el_gets(el_, &count);
    if (interrupted_ || !line || count <= 0) return std::nullopt;
    std::string s(line, static_cast<size_t>(count));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (!s.empty()) {
      HistEvent ev;
      history(hist_, &ev, H_ENTER, s.c_str());
    }
    return s;
  }
  std::string s;
  for (;;) {
    int b = next_byte();
    if (b == -2) return std::nullopt;
    if (b < 0) return s.empty() ? std::nullopt : std::optional<std::string>(s);
    if (b == '\n') return s;
    s += static_cast<char>(b);
  }
}

}  // namespace qwen3::cli
