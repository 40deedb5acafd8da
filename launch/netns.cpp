// NetworkNamespaces: opening the hosts' namespaces and finding the interface they share.
#include "launch/netns.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tether::launch {
namespace {

struct Ipv4Interface {
  std::string name;
  in_addr_t address = 0;  // network byte order
  in_addr_t netmask = 0;
};

bool same_subnet(const Ipv4Interface& a, in_addr_t address) {
  return (a.address & a.netmask) == (address & a.netmask);
}

// Up, non-loopback IPv4 interfaces of the calling thread's network namespace.
std::vector<Ipv4Interface> ipv4_interfaces() {
  std::vector<Ipv4Interface> found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_netmask == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    if ((entry->ifa_flags & IFF_UP) == 0 || (entry->ifa_flags & IFF_LOOPBACK) != 0) continue;
    found.push_back({entry->ifa_name, reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr.s_addr,
                     reinterpret_cast<sockaddr_in*>(entry->ifa_netmask)->sin_addr.s_addr});
  }
  freeifaddrs(list);
  return found;
}

// setns() moves only the calling thread, so a short-lived thread looks inside.
Expected<std::vector<Ipv4Interface>> ipv4_interfaces_in(int fd, const std::string& name) {
  std::vector<Ipv4Interface> found;
  int error = 0;
  std::thread inside([&] {
    if (setns(fd, CLONE_NEWNET) != 0) {
      error = errno;
      return;
    }
    found = ipv4_interfaces();
  });
  inside.join();
  if (error == 0) return found;
  return make_error(Errc::invalid_argument,
                    fmt::format("cannot enter network namespace '{}': setns: {}", name, std::strerror(error)),
                    "run tether-run as root (CAP_SYS_ADMIN) and pass names that `ip netns list` shows", error);
}

bool reaches(const std::vector<Ipv4Interface>& host, in_addr_t address) {
  for (const auto& interface : host)
    if (same_subnet(interface, address)) return true;
  return false;
}

std::string address_text(in_addr_t address) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr value{address};
  inet_ntop(AF_INET, &value, text, sizeof(text));
  return text;
}

}  // namespace

Expected<NetworkNamespaces> NetworkNamespaces::open(const std::vector<std::string>& names) {
  NetworkNamespaces opened;
  for (const auto& name : names) {
    std::string path = "/run/netns/" + name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int error = errno;
      return make_error(Errc::invalid_argument,
                        fmt::format("network namespace '{}' cannot be opened ({}: {})", name, path, std::strerror(error)),
                        fmt::format("create it first (`ip netns add {}`, or netns_create in tests/netns/netns.sh) "
                                    "and pass names that `ip netns list` shows", name),
                        error);
    }
    opened.names_.push_back(name);
    opened.fds_.push_back(fd);
  }
  return opened;
}

NetworkNamespaces::NetworkNamespaces(NetworkNamespaces&& other) noexcept
    : names_(std::move(other.names_)), fds_(std::move(other.fds_)) {
  other.fds_.clear();
}

NetworkNamespaces& NetworkNamespaces::operator=(NetworkNamespaces&& other) noexcept {
  if (this == &other) return *this;
  close_all();
  names_ = std::move(other.names_);
  fds_ = std::move(other.fds_);
  other.fds_.clear();
  return *this;
}

NetworkNamespaces::~NetworkNamespaces() { close_all(); }

void NetworkNamespaces::close_all() noexcept {
  for (int fd : fds_) ::close(fd);
  fds_.clear();
}

Expected<SharedInterface> NetworkNamespaces::shared_interface() const {
  std::vector<std::vector<Ipv4Interface>> hosts;
  for (std::size_t host = 0; host < fds_.size(); ++host) {
    auto inside = ipv4_interfaces_in(fds_[host], names_[host]);
    if (!inside) return tl::unexpected(inside.error());
    hosts.push_back(std::move(*inside));
  }
  for (const auto& candidate : ipv4_interfaces()) {
    bool every_host = true;
    for (const auto& host : hosts) every_host = every_host && reaches(host, candidate.address);
    if (every_host) return SharedInterface{candidate.name, address_text(candidate.address)};
  }
  return make_error(Errc::peer_unreachable,
                    fmt::format("no IPv4 interface of tether-run's network namespace shares a subnet with every "
                                "host in --netns {}: the ranks could not reach the PMIx server",
                                fmt::join(names_, ",")),
                    "plug the namespaces into a bridge that has an address in their subnet "
                    "(netns_create in tests/netns/netns.sh does)");
}

}  // namespace tether::launch
