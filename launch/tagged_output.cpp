// TaggedOutput: line splitting, prefixing and queueing of the ranks' output.
#include "launch/tagged_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

namespace tether::launch {
namespace {

// At most what a target that polls writable takes without blocking: a pipe has a page free
// (PIPE_BUF), a terminal at least 256 bytes.
std::size_t write_chunk(int fd) { return isatty(fd) == 1 ? 256 : 4096; }

bool writable_now(int fd, bool wait) {
  pollfd writable{fd, POLLOUT, 0};
  int ready = 0;
  while ((ready = poll(&writable, 1, wait ? -1 : 0)) < 0 && errno == EINTR) {
  }
  return ready > 0;
}

}  // namespace

void TaggedOutput::add_rank(int rank, int stdout_fd, int stderr_fd) {
  if (stdout_fd >= 0) streams_.push_back(Stream{stdout_fd, rank, STDOUT_FILENO, {}});
  if (stderr_fd >= 0) streams_.push_back(Stream{stderr_fd, rank, STDERR_FILENO, {}});
}

void TaggedOutput::append_pollfds(std::vector<pollfd>& fds) const {
  for (const auto& stream : streams_)
    if (stream.fd >= 0 && targets_[target_of(stream)].queued.size() < kMostQueuedBytes)
      fds.push_back(pollfd{stream.fd, POLLIN, 0});
  for (const auto& target : targets_)
    if (!target.queued.empty()) fds.push_back(pollfd{target.fd, POLLOUT, 0});
}

void TaggedOutput::on_ready(int fd) {
  for (auto& target : targets_)
    if (target.fd == fd) return write_queued(target, false);
  auto stream = std::find_if(streams_.begin(), streams_.end(), [fd](const Stream& s) { return s.fd == fd; });
  if (stream != streams_.end()) read_stream(*stream);
}

void TaggedOutput::read_stream(Stream& stream) {
  char buffer[65536];
  ssize_t got = read(stream.fd, buffer, sizeof(buffer));
  if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (got <= 0) {
    emit_lines(stream, true);
    close_stream(stream);
    return;
  }
  stream.pending.append(buffer, static_cast<std::size_t>(got));
  emit_lines(stream, false);
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
  for (auto& target : targets_) write_queued(target, true);
}

void TaggedOutput::emit_lines(Stream& stream, bool flush_partial) {
  Target& target = targets_[target_of(stream)];
  std::size_t start = 0;
  for (std::size_t end; (end = stream.pending.find('\n', start)) != std::string::npos; start = end + 1) {
    target.queued += fmt::format("[rank {}] ", stream.rank);
    target.queued.append(stream.pending, start, end + 1 - start);
  }
  stream.pending.erase(0, start);
  if (flush_partial && !stream.pending.empty()) {
    target.queued += fmt::format("[rank {}] {}\n", stream.rank, stream.pending);
    stream.pending.clear();
  }
  write_queued(target, false);
}

// Writes what the target takes without blocking (`wait`: all of it). Once nobody reads it
// (`| head`: EPIPE, tether-run ignores SIGPIPE), the ranks' pipes to it close too, so the
// next line a rank writes ends it with SIGPIPE, as without --tag-output.
void TaggedOutput::write_queued(Target& target, bool wait) {
  if (target.chunk == 0) target.chunk = write_chunk(target.fd);
  std::size_t done = 0;
  while (done < target.queued.size() && !target.gone && writable_now(target.fd, wait)) {
    std::size_t chunk = std::min(target.chunk, target.queued.size() - done);
    ssize_t written = write(target.fd, target.queued.data() + done, chunk);
    if (written < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (written <= 0) target.gone = true;
    else done += static_cast<std::size_t>(written);
  }
  target.queued.erase(0, done);
  if (!target.gone) return;
  target.queued.clear();
  for (auto& stream : streams_)
    if (stream.target_fd == target.fd) close_stream(stream);
}

void TaggedOutput::close_stream(Stream& stream) {
  if (stream.fd >= 0) close(stream.fd);
  stream.fd = -1;
}

TaggedOutput::~TaggedOutput() {
  for (auto& stream : streams_) close_stream(stream);
}

}  // namespace tether::launch
