// A private Open MPI session directory for the mpirun jobs of one test, removed when it
// ends: concurrent mpiruns sharing /tmp/ompi.HOST.UID race when one removes it while
// another creates its own (orte_init fails; seen in CI). Pass setting() in the job's
// environment. The shell tests' counterpart: tests/support/ompi-session.sh.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace tether::testing {

class PrivateOmpiSession {
 public:
  PrivateOmpiSession() {
    char pattern[] = "/tmp/tether-ompi.XXXXXX";
    if (::mkdtemp(pattern) != nullptr) directory_ = pattern;
  }
  ~PrivateOmpiSession() {
    std::error_code ignored;
    if (!directory_.empty()) std::filesystem::remove_all(directory_, ignored);
  }
  PrivateOmpiSession(const PrivateOmpiSession&) = delete;
  PrivateOmpiSession& operator=(const PrivateOmpiSession&) = delete;

  // OMPI_MCA_orte_tmpdir_base=DIR (the shared default when the directory could not be made).
  [[nodiscard]] std::string setting() const {
    return "OMPI_MCA_orte_tmpdir_base=" + (directory_.empty() ? std::string("/tmp") : directory_);
  }

 private:
  std::string directory_;
};

}  // namespace tether::testing
