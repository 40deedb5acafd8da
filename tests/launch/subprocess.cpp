// Subprocess: fork/exec with one output pipe, poll-driven reading, watchdog kill.
#include "tests/launch/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

extern char** environ;

namespace tether::testing {
namespace {

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

Subprocess::Subprocess(std::vector<std::string> argv, std::vector<std::string> env)
    : started_(std::chrono::steady_clock::now()) {
  std::vector<std::string> full_env;
  for (char** entry = environ; *entry != nullptr; ++entry) full_env.emplace_back(*entry);
  // getenv takes the first match: the test's entries go first.
  full_env.insert(full_env.begin(), env.begin(), env.end());
  auto args = pointers_to(argv);
  auto envp = pointers_to(full_env);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  output_fd_ = fds[0];
}

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (output_fd_ >= 0) close(output_fd_);
}

bool Subprocess::read_some(int timeout_ms) {
  if (output_fd_ < 0) return false;
  pollfd fd{output_fd_, POLLIN, 0};
  if (poll(&fd, 1, timeout_ms) <= 0) return true;
  char buffer[8192];
  ssize_t got = read(output_fd_, buffer, sizeof(buffer));
  if (got > 0) {
    output_.append(buffer, static_cast<std::size_t>(got));
    return true;
  }
  close(output_fd_);
  output_fd_ = -1;
  return false;
}

Outcome Subprocess::wait(std::chrono::milliseconds watchdog) {
  using Clock = std::chrono::steady_clock;
  Outcome outcome;
  const auto deadline = started_ + watchdog;
  bool terminated = false;
  int status = 0;
  while (pid_ > 0) {
    read_some(50);
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      break;
    }
    auto now = Clock::now();
    if (now > deadline && !terminated) {
      outcome.timed_out = true;
      terminated = true;
      kill(pid_, SIGTERM);
    } else if (now > deadline + std::chrono::seconds(5)) {
      kill(pid_, SIGKILL);
    }
  }
  // The pipe stays open while grandchildren hold it; read what is left for a moment.
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < drain_until && read_some(50)) {
  }
  outcome.exit_code = exit_code_of(status);
  outcome.killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  outcome.output = std::move(output_);
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
  return outcome;
}

// Every job gets a private Open MPI session directory: concurrent mpiruns sharing
// /tmp/ompi.HOST.UID race when one removes it while another creates it (orte_init fails
// with "mkdir ... File exists"). Other launchers ignore the variable.
Outcome run(std::vector<std::string> argv, std::vector<std::string> env, std::chrono::milliseconds watchdog) {
  char session_dir[] = "/tmp/tether-test-ompi.XXXXXX";
  bool private_session = ::mkdtemp(session_dir) != nullptr;
  if (private_session) env.push_back(std::string("OMPI_MCA_orte_tmpdir_base=") + session_dir);
  Subprocess process(std::move(argv), std::move(env));
  Outcome outcome = process.wait(watchdog);
  if (private_session) std::filesystem::remove_all(session_dir);
  return outcome;
}

}  // namespace tether::testing
