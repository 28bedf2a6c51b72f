#include "verify/child_io.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace qwen3::verify {
namespace {

using Clock = std::chrono::steady_clock;

// Reads what one stream has; closes it (fd = -1) at its end. Returns false when `cap` is passed.
bool drain(int& fd, std::string& into, size_t cap, bool truncate_silently) {
  char buf[65536];
  ssize_t r = read(fd, buf, sizeof buf);
  if (r > 0) {
    if (truncate_silently) {
      if (into.size() < cap) into.append(buf, std::min(static_cast<size_t>(r), cap - into.size()));
      return true;
    }
    into.append(buf, static_cast<size_t>(r));
    return into.size() <= cap;
  }
  if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
    close(fd);
    fd = -1;
  }
  return true;
}

void wait_for(pid_t pid, int& status) {
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// Outputs closed: the child is exiting; still bounded by the deadline.
void reap(pid_t pid, const ChildLimits& limits, ChildOutput& out) {
  if (out.timed_out || out.object_too_big || out.deps_too_big) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    wait_for(pid, out.status);
    return;
  }
  for (;;) {
    pid_t w = waitpid(pid, &out.status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) return;
    if (Clock::now() >= limits.deadline) {
      out.timed_out = true;
      kill(pid, SIGKILL);
      wait_for(pid, out.status);
      return;
    }
    usleep(2000);
  }
}

}  // namespace

ChildOutput collect_child(pid_t pid, ChildStreams fds, const std::string& input, const ChildLimits& limits) {
  ChildOutput out;
  fcntl(fds.in_fd, F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (input.empty()) shutdown(fds.in_fd, SHUT_WR);
  while (fds.out_fd >= 0 || fds.err_fd >= 0 || fds.deps_fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(limits.deadline - Clock::now()).count();
    if (left <= 0) {
      out.timed_out = true;
      break;
    }
    struct pollfd pfd[4];
    int n = 0;
    int in_idx = -1, out_idx = -1, err_idx = -1, deps_idx = -1;
    if (fds.deps_fd >= 0) pfd[deps_idx = n++] = {fds.deps_fd, POLLIN, 0};
    if (fds.in_fd >= 0 && written < input.size()) pfd[in_idx = n++] = {fds.in_fd, POLLOUT, 0};
    if (fds.out_fd >= 0) pfd[out_idx = n++] = {fds.out_fd, POLLIN, 0};
    if (fds.err_fd >= 0) pfd[err_idx = n++] = {fds.err_fd, POLLIN, 0};
    int rc = poll(pfd, n, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    if (in_idx >= 0 && pfd[in_idx].revents) {
      ssize_t w = send(fds.in_fd, input.data() + written, input.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) written = input.size();  // reader gone
      if (written >= input.size()) shutdown(fds.in_fd, SHUT_WR);
    }
    if (out_idx >= 0 && pfd[out_idx].revents && !drain(fds.out_fd, out.object, limits.max_object_bytes, false)) {
      out.object_too_big = true;
      break;
    }
    if (deps_idx >= 0 && pfd[deps_idx].revents && !drain(fds.deps_fd, out.deps_text, limits.max_deps_bytes, false)) {
      out.deps_too_big = true;
      break;
    }
    if (err_idx >= 0 && pfd[err_idx].revents) drain(fds.err_fd, out.stderr_text, limits.max_stderr_bytes, true);
  }
  reap(pid, limits, out);
  for (int fd : {fds.in_fd, fds.out_fd, fds.err_fd, fds.deps_fd})
    if (fd >= 0) close(fd);
  return out;
}

}  // namespace qwen3::verify
