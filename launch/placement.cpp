// Placement: round-robin ranks over hosts.
#include "launch/placement.hpp"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

namespace tether::launch {
namespace {

std::string this_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace

Placement make_placement(int ranks, const std::vector<std::string>& namespaces) {
  if (namespaces.empty()) return Placement(ranks, {this_hostname()});
  // Hosts without a rank are left out: PMIx refuses a node with no local peers.
  auto used = std::min(namespaces.size(), static_cast<std::size_t>(ranks));
  return Placement(ranks, std::vector<std::string>(namespaces.begin(), namespaces.begin() + static_cast<std::ptrdiff_t>(used)));
}

std::vector<int> Placement::ranks_on(int host) const {
  std::vector<int> ranks;
  for (int rank = host; rank < ranks_; rank += host_count()) ranks.push_back(rank);
  return ranks;
}

std::string Placement::rank_list_on(int host) const {
  std::string list;
  for (int rank : ranks_on(host)) list += fmt::format("{}{}", list.empty() ? "" : ",", rank);
  return list;
}

}  // namespace tether::launch
