// Start-up of the programs that run as the ranks of a test job.
#pragma once

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "tether/runtime.hpp"

namespace tether::testing {

// The runtime of this rank in a job of `ranks` ranks (0: any size). Otherwise prints why
// and exits: 1 when the runtime does not start, 2 when the job has the wrong size.
inline std::unique_ptr<Runtime> start_job_or_exit(const char* program, int ranks = 0) {
  auto runtime = Runtime::start();
  if (!runtime) {
    fmt::print(stderr, "{}: {}\n", program, runtime.error().message());
    std::exit(1);
  }
  if (ranks > 0 && (*runtime)->size() != ranks) {
    fmt::print(stderr, "{} runs as exactly {} ranks (tether-run -n {} {}), not {}\n", program, ranks, ranks, program,
               (*runtime)->size());
    std::exit(2);
  }
  return std::move(*runtime);
}

}  // namespace tether::testing
