// A connected socket as a Boost.Beast synchronous stream whose every read and
// write is bounded by a deadline (poll(2)), so that a slow or silent client
// fails with timed_out instead of holding its thread. Asio's own synchronous
// sockets wait without limit, and its timers need an io_context per thread.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <chrono>

namespace qwen3::http {

class FdStream {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FdStream(int fd) : fd_(fd) {}

  int fd() const { return fd_; }
  void set_deadline(Clock::time_point t) { deadline_ = t; }
  void expires_after(std::chrono::milliseconds d) { deadline_ = Clock::now() + d; }

  // Waits until the socket is readable or `timeout` passes; false on timeout or hangup.
  bool wait_readable(std::chrono::milliseconds timeout) const {
    pollfd p{fd_, POLLIN, 0};
    int r;
    do r = poll(&p, 1, static_cast<int>(timeout.count()));
    while (r < 0 && errno == EINTR);
    return r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
  }

  // The peer closed or reset the connection (checked without blocking).
  bool peer_gone() const {
    pollfd p{fd_, POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL);
  }

  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const boost::asio::mutable_buffer b = *it;
      if (b.size() == 0) continue;
      if (!wait(POLLIN, ec)) return 0;
      const ssize_t n = ::recv(fd_, b.data(), b.size(), 0);
      if (n > 0) return ec = {}, static_cast<size_t>(n);
      if (n == 0) return ec = boost::asio::error::eof, 0;
      ec = boost::system::error_code(errno, boost::system::system_category());
      return 0;
    }
    ec = {};
    return 0;
  }
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const boost::asio::const_buffer b = *it;
      if (b.size() == 0) continue;
      if (!wait(POLLOUT, ec)) return 0;
      const ssize_t n = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
      if (n >= 0) return ec = {}, static_cast<size_t>(n);
      ec = boost::system::error_code(errno, boost::system::system_category());
      return 0;
    }
    ec = {};
    return 0;
  }
  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers) {
    boost::system::error_code ec;
    const size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  bool wait(short events, boost::system::error_code& ec) const {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) return ec = boost::asio::error::timed_out, false;
      pollfd p{fd_, events, 0};
      const int r = poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return ec = boost::system::error_code(errno, boost::system::system_category()), false;
      if (r == 0) continue;  // re-check the deadline
      return true;           // ready, or an error the next recv/send reports
    }
  }

  int fd_;
  Clock::time_point deadline_ = Clock::now() + std::chrono::seconds(30);
};

}  // namespace qwen3::http
