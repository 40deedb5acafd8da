// Starting one rank (fork + exec with its PMIx environment) and describing how it ended.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "tether/error.hpp"

namespace tether::launch {

struct RankProcess {
  pid_t pid = -1;        // also its process group: signals go to the rank's whole tree
  int stdout_fd = -1;    // read ends when output is tagged, else -1
  int stderr_fd = -1;
};

struct SpawnRequest {
  const std::vector<std::string>* command = nullptr;
  std::vector<std::string> extra_env;  // NAME=value entries that override the inherited ones
  bool capture_output = false;
  int netns_fd = -1;                   // >= 0: the child enters this network namespace before exec
  int cpu = -1;                        // >= 0: the child runs only on this CPU (--bind-to core or auto)
  bool must_bind = true;               // a binding that fails fails the rank (core); else it runs unbound
};

// Forks and execs; reports exec failures (no such program...) as errors, not exit codes.
Expected<RankProcess> spawn_rank(const SpawnRequest& request);

// "exited with code 3", "was killed by signal 9 (SIGKILL)".
[[nodiscard]] std::string describe_wait_status(int wait_status);
// 0 for a clean exit; the exit code; or 128 + signal.
[[nodiscard]] int exit_code_of(int wait_status);

}  // namespace tether::launch
