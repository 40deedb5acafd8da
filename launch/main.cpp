// tether-run: starts N ranks of a program on this node under an embedded PMIx server.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "launch/job.hpp"
#include "launch/launch_options.hpp"
#include "launch/pmix_server.hpp"
#include "launch/temp_dir.hpp"

namespace {

constexpr int kLauncherFailed = 2;

// Blocks the signals the loop reads from a signalfd. Done before PMIx starts its threads
// so that they inherit the mask and the signals reach only the signalfd.
int open_signal_fd() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int signal_number : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&handled, signal_number);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
}

int run_job(const tether::launch::LaunchOptions& options, int signal_fd) {
  auto directory = tether::launch::PrivateTempDir::create();
  if (!directory) {
    std::fputs(fmt::format("tether-run: {}\n", directory.error().message()).c_str(), stderr);
    return kLauncherFailed;
  }
  auto server = tether::launch::PmixServer::start(directory->path(), options.ranks);
  if (!server) {
    std::fputs(fmt::format("tether-run: {}\n", server.error().message()).c_str(), stderr);
    return kLauncherFailed;
  }
  tether::launch::Job job(options, **server, signal_fd);
  return job.run();
}

}  // namespace

int main(int argc, char** argv) {
  auto options = tether::launch::parse_command_line(argc, argv);
  if (!options) {
    std::fputs(fmt::format("tether-run: {}\n{}", options.error().message(), tether::launch::usage_text()).c_str(), stderr);
    return kLauncherFailed;
  }
  if (options->show_help) {
    std::fputs(tether::launch::usage_text().c_str(), stdout);
    return 0;
  }
  int signal_fd = open_signal_fd();
  if (signal_fd < 0) {
    std::fputs(fmt::format("tether-run: signalfd failed: {} (raise the open-file limit)\n", std::strerror(errno)).c_str(), stderr);
    return kLauncherFailed;
  }
  int status = run_job(*options, signal_fd);
  // The PMIx server may still have threads (see ~PmixServer): leave without running
  // static destructors under them. Everything of ours is cleaned up by now.
  std::fflush(nullptr);
  _exit(status);
}
