// tether-run: starts N ranks of a program on this node under an embedded PMIx server.
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "launch/binding.hpp"
#include "launch/job.hpp"
#include "launch/launch_options.hpp"
#include "launch/netns.hpp"
#include "launch/placement.hpp"
#include "launch/pmix_server.hpp"
#include "launch/temp_dir.hpp"

namespace {

constexpr int kLauncherFailed = 2;

bool ignored_by_parent(int signal_number) {
  struct sigaction current {};
  return sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

// Blocks the signals the loop reads from a signalfd. Done before PMIx starts its threads
// so that they inherit the mask and the signals reach only the signalfd. A signal the
// parent ignores (SIGHUP under nohup, SIGINT in a script's background job) stays ignored
// by the launcher and, inherited, by its ranks: nothing forwards what no rank would heed.
int open_signal_fd() {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
    if (!ignored_by_parent(signal_number)) sigaddset(&handled, signal_number);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
}

int launcher_failed(const tether::Error& error) {
  std::fputs(fmt::format("tether-run: {}\n", error.message()).c_str(), stderr);
  return kLauncherFailed;
}

// With --netns: the namespaces, and the interface of ours they all reach (for PMIx).
tether::Expected<std::optional<tether::launch::SharedInterface>> open_hosts(
    const tether::launch::LaunchOptions& options, tether::launch::NetworkNamespaces& hosts) {
  if (options.netns.empty()) return std::optional<tether::launch::SharedInterface>();
  auto opened = tether::launch::NetworkNamespaces::open(options.netns);
  if (!opened) return tl::unexpected(opened.error());
  hosts = std::move(*opened);
  auto shared = hosts.shared_interface();
  if (!shared) return tl::unexpected(shared.error());
  return std::optional(*shared);
}

// The launcher holds up to 4 descriptors per rank (its output and error pipes, its PMIx
// connection, its exec-status pipe while it starts): a soft open-file limit below that for
// -n ranks (1024 by default: -n 241 and up) is raised towards the hard limit, for the job
// and the ranks, which inherit it. Where the hard limit is lower, the first pipe2 or
// socket that fails names the fix.
void raise_open_file_limit(int ranks) {
  constexpr rlim_t kPerRank = 4;
  constexpr rlim_t kLauncherOwn = 64;
  const rlim_t needed = kPerRank * static_cast<rlim_t>(ranks) + kLauncherOwn;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
  (void)setrlimit(RLIMIT_NOFILE, &limit);
}

// `interrupted_by`: the signal that stopped the job, 0 if none.
int run_job(const tether::launch::LaunchOptions& options, int signal_fd, int& interrupted_by) {
  auto rank_cpus = tether::launch::cpus_for_ranks(options.binding, options.ranks);
  if (!rank_cpus) return launcher_failed(rank_cpus.error());
  tether::launch::NetworkNamespaces hosts;
  auto listen_on = open_hosts(options, hosts);
  if (!listen_on) return launcher_failed(listen_on.error());
  auto directory = tether::launch::PrivateTempDir::create();
  if (!directory) return launcher_failed(directory.error());
  auto placement = tether::launch::make_placement(options.ranks, options.netns);
  auto server = tether::launch::PmixServer::start(directory->path(), std::move(placement), *listen_on);
  if (!server) return launcher_failed(server.error());
  tether::launch::Job job(options, **server, hosts, signal_fd, std::move(*rank_cpus));
  int status = job.run();
  interrupted_by = job.interrupted_by();
  return status;
}

// Ends tether-run by `signal_number` with its default action, which the shell that ran it
// then sees: a loop of jobs stops at Ctrl-C instead of going on to the next (an exit code
// of 130 reads as a program that handled the signal itself). Not SIGQUIT: no core dump.
void die_by(int signal_number) {
  if (signal_number == SIGQUIT) return;
  signal(signal_number, SIG_DFL);
  raise(signal_number);  // pending: the signal is blocked (it went to the signalfd)
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal_number);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
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
  raise_open_file_limit(options->ranks);
  int signal_fd = open_signal_fd();
  if (signal_fd < 0) {
    std::fputs(fmt::format("tether-run: signalfd failed: {} (raise the open-file limit)\n", std::strerror(errno)).c_str(), stderr);
    return kLauncherFailed;
  }
  int interrupted_by = 0;
  int status = run_job(*options, signal_fd, interrupted_by);
  // The PMIx server may still have threads (see ~PmixServer): leave without running
  // static destructors under them. Everything of ours is cleaned up by now.
  std::fflush(nullptr);
  if (interrupted_by != 0 && status == 128 + interrupted_by) die_by(interrupted_by);  // a failure before it decides
  _exit(status);
}
