// Job: the launcher's event loop (poll on a signalfd, the PMIx wake fd and output pipes).
#include "launch/job.hpp"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launch/rank_process.hpp"
#include "transport/ofi/shm_regions.hpp"
#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"

namespace tether::launch {
namespace {

constexpr auto kKillAfterTerm = std::chrono::milliseconds(2000);
constexpr auto kKillAfterInterrupt = std::chrono::milliseconds(5000);
constexpr int kExitCodeWithoutFinalize = 1;
constexpr const char* kExitedWithoutFinalize =
    "exited with code 0 without finalizing: it connected to the PMIx server, which never heard its PMIx_Finalize "
    "(a tether::Runtime destroyed before exit calls it; exit() from elsewhere, _exit() or quick_exit() skip it; "
    "or the rank's host lost its link to the server)";

// fputs, not fmt::print: a closed stderr (a reader that quit) must not abort the launcher.
void say(std::string_view text) { std::fputs(fmt::format("tether-run: {}\n", text).c_str(), stderr); }

// The launcher's exit status for an abort code: its low 8 bits, as a shell would see them,
// but never 0 (an abort with code 0 or 256 still failed the job).
int exit_status_for_abort(int code) {
  int low_bits = code & 0xff;
  return low_bits == 0 ? 1 : low_bits;
}

std::string signal_name(int signal_number) {
  const char* abbrev = sigabbrev_np(signal_number);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal_number);
}

// This process's children: its threads' lists (an orphan is given to the process, which
// may file it under any of its threads).
std::vector<pid_t> children_of_this_process() {
  std::vector<pid_t> children;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream list(task.path() / "children");
    for (pid_t pid = 0; list >> pid;) children.push_back(pid);
  }
  return children;
}

void signal_process_or_group(pid_t pid, int signal_number) {
  if (kill(-pid, signal_number) != 0) kill(pid, signal_number);
}

}  // namespace

Job::Job(const LaunchOptions& options, PmixServer& server, const NetworkNamespaces& hosts, int signal_fd,
         std::vector<int> rank_cpus)
    : options_(options),
      server_(server),
      hosts_(hosts),
      signal_fd_(signal_fd),
      rank_cpus_(std::move(rank_cpus)),
      ranks_(static_cast<std::size_t>(options.ranks)) {}

bool Job::start_ranks() {
  for (int rank = 0; rank < options_.ranks; ++rank) {
    auto env = server_.prepare_rank(rank);
    int netns_fd = hosts_.empty() ? -1 : hosts_.fd(server_.placement().host_of(rank));
    int cpu = rank_cpus_.empty() ? -1 : rank_cpus_[static_cast<std::size_t>(rank)];
    // A rank alone on its CPU need not yield on every poll (the user's TETHER_YIELD wins).
    if (env && cpu >= 0 && !config::Config::global().is_set("TETHER_YIELD")) env->push_back("TETHER_YIELD=off");
    bool must_bind = options_.binding == Binding::core;  // auto: a rank that cannot be bound runs unbound
    auto process = env ? spawn_rank({&options_.command, std::move(*env), options_.tag_output, netns_fd, cpu, must_bind})
                       : tl::unexpected(env.error());
    if (!process) {
      record_failure(fmt::format("rank {} could not start: {}", rank, process.error().message()),
                     process.error().code == Errc::invalid_argument ? 127 : 1);
      stop_running("a rank could not start", kKillAfterTerm);
      return false;
    }
    ranks_[static_cast<std::size_t>(rank)] = Rank{process->pid, true};
    output_.add_rank(rank, process->stdout_fd, process->stderr_fd);
  }
  log::info("launch", "started {} ranks of {} in job {}", options_.ranks, options_.command.front(), server_.job_id());
  return true;
}

int Job::run() {
  if (options_.timeout.count() > 0) timeout_at_ = Clock::now() + options_.timeout;
  // Processes the ranks leave behind become this launcher's children, so they can end with
  // the job, and their pids are not reused while it may signal them.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    log::info("launch", "cannot adopt processes ranks leave behind (PR_SET_CHILD_SUBREAPER: {})", strerror(errno));
  start_ranks();
  while (running_count() > 0) {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}, {server_.wake_fd(), POLLIN, 0}};
    output_.append_pollfds(fds);
    int ready = poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0 && errno != EINTR) log::warn("launch", "poll failed: {}", strerror(errno));
    if (ready > 0) dispatch(fds);
    reap_children();
    check_deadlines();
  }
  end_left_behind();
  output_.drain();
  return finish();
}

// Children that are not running ranks: processes ranks started and left behind.
std::vector<pid_t> Job::left_behind() const {
  std::vector<pid_t> left = children_of_this_process();
  std::erase_if(left, [this](pid_t pid) {
    return std::any_of(ranks_.begin(), ranks_.end(), [pid](const Rank& r) { return r.running && r.pid == pid; });
  });
  return left;
}

// Once every rank ended, what they left behind ends too, as a batch system ends a job's
// processes: SIGTERM, SIGKILL after kKillAfterTerm (one stuck in the kernel is left to init).
void Job::end_left_behind() {
  std::vector<pid_t> left = left_behind();
  if (left.empty()) return;
  say(fmt::format("the ranks left {} processes running (pids {}): sending SIGTERM, they end with the job", left.size(),
                  fmt::join(left, ",")));
  for (pid_t pid : left) signal_process_or_group(pid, SIGTERM);
  left = reap_left_behind_for(kKillAfterTerm);
  if (left.empty()) return;
  say(fmt::format("killing processes {} (SIGKILL)", fmt::join(left, ",")));
  for (pid_t pid : left) signal_process_or_group(pid, SIGKILL);
  (void)reap_left_behind_for(kKillAfterTerm);
}

// Reaps until nothing is left behind or `time` passed; returns what is left.
std::vector<pid_t> Job::reap_left_behind_for(std::chrono::milliseconds time) {
  const auto give_up = Clock::now() + time;
  std::vector<pid_t> left = left_behind();
  for (; !left.empty() && Clock::now() < give_up; left = left_behind()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reap_children();
  }
  return left;
}

// Aborts first (a rank that aborted may exit at once: its abort names the cause), then
// ranks that ended, then signals (a rank that died before a Ctrl-C is the job's failure,
// not the interruption), then output.
void Job::dispatch(const std::vector<pollfd>& fds) {
  auto ready = [&fds](int fd) {
    return std::any_of(fds.begin(), fds.end(), [fd](const pollfd& p) { return p.fd == fd && p.revents != 0; });
  };
  if (ready(server_.wake_fd())) on_aborts();
  reap_children();
  if (ready(signal_fd_)) {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info)))
      on_signal(static_cast<int>(info.ssi_signo));
  }
  for (const pollfd& p : fds)
    if (p.revents != 0 && p.fd != signal_fd_ && p.fd != server_.wake_fd()) output_.on_ready(p.fd);
}

void Job::on_signal(int signal_number) {
  if (signal_number == SIGCHLD) return;  // reap_children() runs after every wake-up
  if (interrupted_by_ != 0) {
    say(fmt::format("{} again: killing ranks {}", signal_name(signal_number), running_ranks()));
    signal_running(SIGKILL);
    return;
  }
  interrupted_by_ = signal_number;
  stopping_ = true;
  signal_running(signal_number);  // before saying so: writing to a full pipe may block
  say(fmt::format("got {}: forwarded it to ranks {}", signal_name(signal_number), running_ranks()));
  kill_at_ = Clock::now() + kKillAfterInterrupt;
}

void Job::on_aborts() {
  for (auto& request : server_.take_aborts()) {
    record_failure(fmt::format("rank {} called abort with exit code {}: {}", request.rank, request.exit_code,
                               request.message),
                   exit_status_for_abort(request.exit_code));
    stop_running(fmt::format("rank {} aborted the job", request.rank), kKillAfterTerm);
  }
}

// Each ended child is looked at first (WNOWAIT): while it is a zombie its pid cannot be
// given to another process, so the shm regions named after it are its own to remove.
void Job::reap_children() {
  siginfo_t ended{};
  while (waitid(P_ALL, 0, &ended, WEXITED | WNOHANG | WNOWAIT) == 0 && ended.si_pid != 0) {
    pid_t pid = ended.si_pid;
    auto found = std::find_if(ranks_.begin(), ranks_.end(), [pid](const Rank& r) { return r.pid == pid; });
    if (found != ranks_.end()) (void)transport::ofi::remove_shm_regions_of(pid);  // left if killed or _exit-ed
    int wait_status = 0;
    if (waitpid(pid, &wait_status, 0) != pid) return;
    if (found != ranks_.end()) on_rank_ended(static_cast<int>(found - ranks_.begin()), wait_status);
    ended = siginfo_t{};
  }
}

void Job::on_rank_ended(int rank, int wait_status) {
  Rank& ended = ranks_[static_cast<std::size_t>(rank)];
  ended.running = false;
  bool exited_zero = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  // Exit code 0 ends a rank well unless it left the PMIx job open: its peers may still
  // wait for it in a fence or a message (mpirun fails such a job too).
  if (exited_zero && server_.stage(rank) != ClientStage::connected) return;
  std::string text = fmt::format("rank {} (pid {}) {}", rank, ended.pid,
                                 exited_zero ? kExitedWithoutFinalize : describe_wait_status(wait_status));
  int exit_code = exited_zero ? kExitCodeWithoutFinalize : exit_code_of(wait_status);
  if (stopping_) {
    log::info("launch", "{}", text);
    return;
  }
  bool first = !first_failure_.has_value();
  record_failure(text, exit_code);
  if (running_count() == 0) return;
  say(fmt::format("{}; telling ranks {}", text, running_ranks()));
  server_.notify_death(rank, exit_code, text);
  if (first) terminate_at_ = Clock::now() + options_.kill_after;
}

void Job::check_deadlines() {
  const auto now = Clock::now();
  if (timeout_at_ && now >= *timeout_at_) {
    timeout_at_.reset();
    auto seconds = std::chrono::duration<double>(options_.timeout).count();
    record_failure(fmt::format("the job timed out after {:g} s with ranks {} still running", seconds, running_ranks()),
                   124);
    stop_running("--timeout expired", kKillAfterTerm);
  }
  if (terminate_at_ && now >= *terminate_at_) {
    terminate_at_.reset();
    stop_running(fmt::format("ranks {} still run after a failure", running_ranks()), kKillAfterTerm);
  }
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    if (running_count() > 0) say(fmt::format("killing ranks {} (SIGKILL)", running_ranks()));
    signal_running(SIGKILL);
  }
}

void Job::record_failure(std::string text, int exit_code) {
  if (first_failure_) return;
  first_failure_ = Failure{std::move(text), exit_code};
}

// Signals first: the message goes to stderr, which may be a full pipe nobody reads.
void Job::stop_running(std::string why, std::chrono::milliseconds kill_after) {
  stopping_ = true;
  signal_running(SIGTERM);
  kill_at_ = Clock::now() + kill_after;
  if (running_count() > 0) say(fmt::format("{}: sent SIGTERM to ranks {}", why, running_ranks()));
}

// The running ranks, and what ranks that ended left behind.
void Job::signal_running(int signal_number) {
  for (const auto& rank : ranks_)
    if (rank.running) signal_process_or_group(rank.pid, signal_number);
  for (pid_t pid : left_behind()) signal_process_or_group(pid, signal_number);
}

std::string Job::running_ranks() const {
  std::string list;
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank)
    if (ranks_[rank].running) list += fmt::format("{}{}", list.empty() ? "" : ",", rank);
  return list.empty() ? "none" : list;
}

int Job::running_count() const {
  return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
}

int Job::poll_timeout_ms() const {
  auto wait = std::chrono::milliseconds(1000);
  const auto now = Clock::now();
  for (const auto& deadline : {timeout_at_, terminate_at_, kill_at_}) {
    if (!deadline) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now) + std::chrono::milliseconds(1);
    wait = std::clamp(left, std::chrono::milliseconds(0), wait);
  }
  return static_cast<int>(wait.count());
}

int Job::finish() {
  if (first_failure_) {
    say(fmt::format("job failed: {} (exit code {})", first_failure_->text, first_failure_->exit_code));
    return first_failure_->exit_code;
  }
  if (interrupted_by_ != 0) {
    say(fmt::format("job interrupted by {}", signal_name(interrupted_by_)));
    return 128 + interrupted_by_;
  }
  return 0;
}

}  // namespace tether::launch
