// Placement: which host each rank of a tether-run job runs on. Without --netns there is one
// host (this node); with `--netns a,b,c` each network namespace is a host of its own and
// rank r runs on host r % 3 (round-robin), so neighbouring ranks sit on different hosts.
#pragma once

#include <string>
#include <vector>

namespace tether::launch {

class Placement {
 public:
  Placement(int ranks, std::vector<std::string> hosts) : ranks_(ranks), hosts_(std::move(hosts)) {}

  [[nodiscard]] int ranks() const { return ranks_; }
  [[nodiscard]] int host_count() const { return static_cast<int>(hosts_.size()); }
  [[nodiscard]] const std::string& host_name(int host) const { return hosts_[static_cast<std::size_t>(host)]; }
  [[nodiscard]] int host_of(int rank) const { return rank % host_count(); }
  [[nodiscard]] int local_rank(int rank) const { return rank / host_count(); }
  [[nodiscard]] std::vector<int> ranks_on(int host) const;
  // "0,3,6" for PMIX_LOCAL_PEERS.
  [[nodiscard]] std::string rank_list_on(int host) const;

 private:
  int ranks_;
  std::vector<std::string> hosts_;
};

// One host per namespace name (those beyond the rank count get none and are left out);
// with none, this node under its hostname.
[[nodiscard]] Placement make_placement(int ranks, const std::vector<std::string>& namespaces);

}  // namespace tether::launch
