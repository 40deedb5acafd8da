// TaggedOutput: forwards the ranks' stdout/stderr pipes line by line, each line prefixed
// "[rank R] ". A partial last line is flushed (with a newline) when its pipe closes.
// Lines wait in a queue while tether-run's own stdout or stderr is full (a stalled reader):
// the job loop goes on (signals, --timeout, dead ranks) and stops reading the pipes that
// feed a full queue, so those ranks block on their writes as they would untagged.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

namespace tether::launch {

class TaggedOutput {
 public:
  // Takes ownership of the read ends; -1 entries are ignored.
  void add_rank(int rank, int stdout_fd, int stderr_fd);
  // Appends a pollfd for each open pipe whose queue has room, and for each target with
  // lines queued.
  void append_pollfds(std::vector<pollfd>& fds) const;
  // Reads whatever `fd` has (a rank's pipe; closed at end of file), or writes what is
  // queued for it (tether-run's stdout or stderr).
  void on_ready(int fd);
  // After every rank exited: reads the pipes until they are closed and writes everything.
  void drain();
  ~TaggedOutput();

 private:
  struct Stream {
    int fd;
    int rank;
    int target_fd;  // STDOUT_FILENO or STDERR_FILENO
    std::string pending;
  };
  struct Target {
    int fd;
    std::string queued;
    bool gone = false;      // its reader went away (EPIPE) or writing failed
    std::size_t chunk = 0;  // bytes per write (set at the first)
  };
  // Past this much queued for a target, its ranks' pipes are not read.
  static constexpr std::size_t kMostQueuedBytes = std::size_t{1} << 20;

  void read_stream(Stream& stream);
  void emit_lines(Stream& stream, bool flush_partial);
  void write_queued(Target& target, bool wait);
  void close_stream(Stream& stream);
  [[nodiscard]] static std::size_t target_of(const Stream& stream) { return stream.target_fd == STDOUT_FILENO ? 0 : 1; }

  std::vector<Stream> streams_;
  std::array<Target, 2> targets_{Target{STDOUT_FILENO, {}}, Target{STDERR_FILENO, {}}};
};

}  // namespace tether::launch
