// spawn_rank: everything the child needs is built before fork(); after it the child only
// makes async-signal-safe calls (the launcher has PMIx threads).
#include "launch/rank_process.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "runtime/base/cpus.hpp"

extern char** environ;

namespace tether::launch {
namespace {

std::string_view name_of(const std::string& entry) { return std::string_view(entry).substr(0, entry.find('=')); }

// The launcher's environment with `overrides` replacing or adding entries.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> merged;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string current(*entry);
    bool replaced = false;
    for (const auto& override_entry : overrides) replaced = replaced || name_of(override_entry) == name_of(current);
    if (!replaced) merged.push_back(std::move(current));
  }
  merged.insert(merged.end(), overrides.begin(), overrides.end());
  return merged;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

struct ChildPipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int exec_status[2] = {-1, -1};  // CLOEXEC: closes on a successful exec, carries errno otherwise
};

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// A failed setns() goes back through the exec-status pipe as a negative errno, a failed
// sched_setaffinity() as a negative errno less kAffinityFailed.
constexpr int kAffinityFailed = 1 << 20;
[[noreturn]] void report_and_exit(ChildPipes& pipes, int code) {
  ssize_t written = write(pipes.exec_status[1], &code, sizeof(code));
  (void)written;
  _exit(127);
}

// A binding that may fail (--bind-to auto) leaves the rank unbound instead.
void bind_or_report(ChildPipes& pipes, const SpawnRequest& request) {
  if (!base::bind_to_cpu(request.cpu) && request.must_bind) report_and_exit(pipes, -errno - kAffinityFailed);
}

[[noreturn]] void run_child(ChildPipes& pipes, char** argv, char** envp, const SpawnRequest& request,
                           pid_t launcher) {
  setpgid(0, 0);
  // A launcher killed outright (SIGKILL) takes its ranks along instead of leaving them
  // running; one that died before this line is caught by its pid changing.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(127);
  if (request.netns_fd >= 0 && setns(request.netns_fd, CLONE_NEWNET) != 0) report_and_exit(pipes, -errno);
  if (request.cpu >= 0) bind_or_report(pipes, request);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);  // the rank keeps only its stdin copy
  if (null_fd == STDIN_FILENO) fcntl(STDIN_FILENO, F_SETFD, 0);
  else if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  if (request.capture_output) {
    dup2(pipes.out[1], STDOUT_FILENO);
    dup2(pipes.err[1], STDERR_FILENO);
  }
  execvpe(argv[0], argv, envp);
  report_and_exit(pipes, errno);
}

Expected<void> open_pipes(ChildPipes& pipes, bool capture) {
  bool ok = pipe2(pipes.exec_status, O_CLOEXEC) == 0;
  if (capture) ok = ok && pipe2(pipes.out, O_CLOEXEC) == 0 && pipe2(pipes.err, O_CLOEXEC) == 0;
  if (ok) return {};
  int error = errno;
  return make_error(Errc::out_of_memory, fmt::format("pipe2 failed: {}", strerror(error)),
                    "raise the open-file limit (ulimit -n) or start fewer ranks", error);
}

Expected<void> wait_for_exec(ChildPipes& pipes, const std::string& program) {
  close_fd(pipes.exec_status[1]);
  int child_errno = 0;
  ssize_t got = 0;
  do {
    got = read(pipes.exec_status[0], &child_errno, sizeof(child_errno));
  } while (got < 0 && errno == EINTR);
  close_fd(pipes.exec_status[0]);
  if (got <= 0) return {};
  if (child_errno <= -kAffinityFailed) {
    int error = -child_errno - kAffinityFailed;
    return make_error(Errc::invalid_argument, fmt::format("cannot bind the rank to its CPU: sched_setaffinity: {}", strerror(error)),
                      "run with --bind-to none", error);
  }
  if (child_errno < 0) {
    return make_error(Errc::invalid_argument,
                      fmt::format("cannot enter the rank's network namespace: setns: {}", strerror(-child_errno)),
                      "run tether-run as root and pass --netns names that `ip netns list` shows", -child_errno);
  }
  return make_error(Errc::invalid_argument, fmt::format("cannot run '{}': {}", program, strerror(child_errno)),
                    "check the program path (absolute, relative to the current directory, or on PATH) and "
                    "that it is executable", child_errno);
}

}  // namespace

Expected<RankProcess> spawn_rank(const SpawnRequest& request) {
  std::vector<std::string> args = *request.command;
  std::vector<std::string> env = merged_environment(request.extra_env);
  std::vector<char*> argv = pointers_to(args);
  std::vector<char*> envp = pointers_to(env);
  ChildPipes pipes;
  if (auto opened = open_pipes(pipes, request.capture_output); !opened) return tl::unexpected(opened.error());
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0) run_child(pipes, argv.data(), envp.data(), request, launcher);
  int fork_errno = errno;
  close_fd(pipes.out[1]);
  close_fd(pipes.err[1]);
  RankProcess process{pid, pipes.out[0], pipes.err[0]};
  if (pid < 0) {
    close_fd(pipes.exec_status[0]);
    close_fd(pipes.exec_status[1]);
    close_fd(process.stdout_fd);
    close_fd(process.stderr_fd);
    return make_error(Errc::out_of_memory, fmt::format("fork failed: {}", strerror(fork_errno)),
                      "raise the process limit (ulimit -u) or start fewer ranks", fork_errno);
  }
  setpgid(pid, pid);  // also in the child: whichever runs first wins the race
  if (auto started = wait_for_exec(pipes, args.front()); !started) {
    waitpid(pid, nullptr, 0);
    close_fd(process.stdout_fd);
    close_fd(process.stderr_fd);
    return tl::unexpected(started.error());
  }
  return process;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with code {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int signal_number = WTERMSIG(wait_status);
    const char* abbrev = sigabbrev_np(signal_number);
    return fmt::format("was killed by signal {} (SIG{}{})", signal_number, abbrev != nullptr ? abbrev : "?",
                       WCOREDUMP(wait_status) ? ", core dumped" : "");
  }
  return fmt::format("ended with wait status {:#x}", wait_status);
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace tether::launch
