// NetworkNamespaces: the hosts named by `tether-run --netns a,b,c`. Each name is a network
// namespace under /run/netns (as `ip netns add` makes them); it is opened once, and each
// rank's child enters its host's namespace with setns() before exec. The PMIx server
// stays in tether-run's own namespace and listens on the interface every host reaches.
#pragma once

#include <string>
#include <vector>

#include "tether/error.hpp"

namespace tether::launch {

// An interface of tether-run's own namespace, e.g. {"ttb4242", "10.77.3.1"}.
struct SharedInterface {
  std::string name;
  std::string address;
};

class NetworkNamespaces {
 public:
  NetworkNamespaces() = default;
  // Opens /run/netns/<name> for every name; fails naming the first one that is missing.
  static Expected<NetworkNamespaces> open(const std::vector<std::string>& names);
  NetworkNamespaces(NetworkNamespaces&& other) noexcept;
  NetworkNamespaces& operator=(NetworkNamespaces&& other) noexcept;
  NetworkNamespaces(const NetworkNamespaces&) = delete;
  ~NetworkNamespaces();

  [[nodiscard]] bool empty() const { return fds_.empty(); }
  [[nodiscard]] const std::vector<std::string>& names() const { return names_; }
  // Open (close-on-exec) descriptor of host `host`'s namespace, for setns().
  [[nodiscard]] int fd(int host) const { return fds_[static_cast<std::size_t>(host)]; }
  // The interface of this namespace whose IPv4 subnet holds an address of every host
  // (the bridge the hosts' veth pairs are plugged into).
  [[nodiscard]] Expected<SharedInterface> shared_interface() const;

 private:
  void close_all() noexcept;
  std::vector<std::string> names_;
  std::vector<int> fds_;
};

}  // namespace tether::launch
