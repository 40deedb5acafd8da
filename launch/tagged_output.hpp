// TaggedOutput: forwards the ranks' stdout/stderr pipes line by line, each line prefixed
// "[rank R] ". A partial last line is flushed (with a newline) when its pipe closes.
#pragma once

#include <poll.h>

#include <string>
#include <vector>

namespace tether::launch {

class TaggedOutput {
 public:
  // Takes ownership of the read ends; -1 entries are ignored.
  void add_rank(int rank, int stdout_fd, int stderr_fd);
  // Appends a pollfd for each open pipe to `fds`.
  void append_pollfds(std::vector<pollfd>& fds) const;
  // Reads whatever `fd` has; closes it at end of file.
  void on_readable(int fd);
  // After every rank exited: reads the pipes until they are closed.
  void drain();
  ~TaggedOutput();

 private:
  struct Stream {
    int fd;
    int rank;
    int target_fd;  // STDOUT_FILENO or STDERR_FILENO
    std::string pending;
  };
  void emit_lines(Stream& stream, bool flush_partial);
  void close_stream(Stream& stream);

  std::vector<Stream> streams_;
};

}  // namespace tether::launch
