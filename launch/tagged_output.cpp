// TaggedOutput: line splitting and prefixing of the ranks' output.
#include "launch/tagged_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace tether::launch {
namespace {

// false once the reader is gone (EPIPE: tether-run ignores SIGPIPE) or the write failed.
// A non-blocking target (the caller's choice) is waited for, not dropped.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0 && errno == EAGAIN) {
      pollfd writable{fd, POLLOUT, 0};
      (void)poll(&writable, 1, -1);
      continue;
    }
    if (written <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

}  // namespace

void TaggedOutput::add_rank(int rank, int stdout_fd, int stderr_fd) {
  if (stdout_fd >= 0) streams_.push_back(Stream{stdout_fd, rank, STDOUT_FILENO, {}});
  if (stderr_fd >= 0) streams_.push_back(Stream{stderr_fd, rank, STDERR_FILENO, {}});
}

void TaggedOutput::append_pollfds(std::vector<pollfd>& fds) const {
  for (const auto& stream : streams_)
    if (stream.fd >= 0) fds.push_back(pollfd{stream.fd, POLLIN, 0});
}

void TaggedOutput::on_readable(int fd) {
  for (auto& stream : streams_) {
    if (stream.fd != fd) continue;
    char buffer[65536];
    ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (got <= 0) {
      emit_lines(stream, true);
      close_stream(stream);
      return;
    }
    stream.pending.append(buffer, static_cast<std::size_t>(got));
    emit_lines(stream, false);
    return;
  }
}

void TaggedOutput::drain() {
  for (auto& stream : streams_) {
    if (stream.fd < 0) continue;
    fcntl(stream.fd, F_SETFL, fcntl(stream.fd, F_GETFL) | O_NONBLOCK);
    char buffer[65536];
    ssize_t got = 0;
    while ((got = read(stream.fd, buffer, sizeof(buffer))) > 0) stream.pending.append(buffer, static_cast<std::size_t>(got));
    emit_lines(stream, true);
    close_stream(stream);  // a grandchild may still hold the pipe: its later output is lost
  }
}

void TaggedOutput::emit_lines(Stream& stream, bool flush_partial) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t end; (end = stream.pending.find('\n', start)) != std::string::npos; start = end + 1) {
    out += fmt::format("[rank {}] ", stream.rank);
    out.append(stream.pending, start, end + 1 - start);
  }
  stream.pending.erase(0, start);
  if (flush_partial && !stream.pending.empty()) {
    out += fmt::format("[rank {}] {}\n", stream.rank, stream.pending);
    stream.pending.clear();
  }
  if (write_all(stream.target_fd, out)) return;
  // Nobody reads that output any more (`| head`): its ranks' pipes close too, so the next
  // line a rank writes ends it with SIGPIPE, as without --tag-output.
  int gone = stream.target_fd;
  for (auto& other : streams_)
    if (other.target_fd == gone) close_stream(other);
}

void TaggedOutput::close_stream(Stream& stream) {
  if (stream.fd >= 0) close(stream.fd);
  stream.fd = -1;
}

TaggedOutput::~TaggedOutput() {
  for (auto& stream : streams_) close_stream(stream);
}

}  // namespace tether::launch
