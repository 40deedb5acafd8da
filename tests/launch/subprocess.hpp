// Subprocess: runs a launcher for a test with stdout+stderr captured and a watchdog.
// A process still running at its deadline gets SIGTERM (tether-run and mpirun pass it on
// to their ranks), then SIGKILL 5 s later, and the test sees timed_out.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tether::testing {

struct Outcome {
  int exit_code = -1;       // exit code, or 128 + signal
  int killed_by = 0;        // the signal that ended it, 0 if it exited
  bool timed_out = false;   // the watchdog had to stop it
  std::string output;       // stdout and stderr, interleaved
  std::chrono::milliseconds elapsed{0};
};

class Subprocess {
 public:
  // `env` entries (NAME=value) are added to this process's environment.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env);
  ~Subprocess();  // kills and reaps a process still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  // Reads output until the process exits or `watchdog` passes.
  Outcome wait(std::chrono::milliseconds watchdog);

 private:
  bool read_some(int timeout_ms);
  pid_t pid_ = -1;
  int output_fd_ = -1;
  std::string output_;
  std::chrono::steady_clock::time_point started_;
};

// Starts, waits with the watchdog, returns the outcome.
Outcome run(std::vector<std::string> argv, std::vector<std::string> env, std::chrono::milliseconds watchdog);

}  // namespace tether::testing
