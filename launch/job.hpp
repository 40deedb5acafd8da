// Job: the launcher's loop. Starts the ranks, then reacts to their exits, PMIx aborts,
// forwarded signals, the --timeout and the grace after a failure, until every rank ended.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launch/launch_options.hpp"
#include "launch/netns.hpp"
#include "launch/pmix_server.hpp"
#include "launch/tagged_output.hpp"

namespace tether::launch {

class Job {
 public:
  // `hosts` is empty, or holds one network namespace per host of the server's placement;
  // `rank_cpus` is empty, or the CPU each rank is bound to.
  Job(const LaunchOptions& options, PmixServer& server, const NetworkNamespaces& hosts, int signal_fd,
      std::vector<int> rank_cpus = {});
  // Starts every rank, runs until they all ended, and returns tether-run's exit code.
  int run();
  // The signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) that stopped the job, 0 if none did.
  [[nodiscard]] int interrupted_by() const { return interrupted_by_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Rank {
    pid_t pid = -1;
    bool running = false;
  };
  struct Failure {
    std::string text;
    int exit_code = 1;
  };

  bool start_ranks();
  void dispatch(const std::vector<pollfd>& fds);
  void on_signal(int signal_number);
  void on_aborts();
  void reap_children();
  void on_rank_ended(int rank, int wait_status);
  void check_deadlines();
  void record_failure(std::string text, int exit_code);
  void stop_running(std::string why, std::chrono::milliseconds kill_after);
  void signal_running(int signal_number);
  [[nodiscard]] std::vector<pid_t> left_behind() const;
  void end_left_behind();
  std::vector<pid_t> reap_left_behind_for(std::chrono::milliseconds time);
  [[nodiscard]] std::string running_ranks() const;
  [[nodiscard]] int running_count() const;
  [[nodiscard]] int poll_timeout_ms() const;
  int finish();

  const LaunchOptions& options_;
  PmixServer& server_;
  const NetworkNamespaces& hosts_;
  int signal_fd_;
  std::vector<int> rank_cpus_;
  std::vector<Rank> ranks_;
  TaggedOutput output_;
  std::optional<Failure> first_failure_;
  int interrupted_by_ = 0;
  bool stopping_ = false;  // the launcher is ending the job: exits are no longer failures
  std::optional<Clock::time_point> timeout_at_, terminate_at_, kill_at_;
};

}  // namespace tether::launch
