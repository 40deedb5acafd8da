// What tether-run registers for its job: ranks 0..N-1 on one node, or round-robin over the
// --netns hosts, each described as a node of its own.
#include "launch/pmix_job_info.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/bootstrap/pmix_values.hpp"

namespace tether::launch {
namespace {

std::string host_list(const Placement& placement) {
  std::string list;
  for (int host = 0; host < placement.host_count(); ++host)
    list += fmt::format("{}{}", host == 0 ? "" : ",", placement.host_name(host));
  return list;
}

// "0,3;1,4;2" : the ranks of each host, hosts separated by ';' (PMIx_generate_ppn's input).
std::string ranks_per_host(const Placement& placement) {
  std::string list;
  for (int host = 0; host < placement.host_count(); ++host)
    list += fmt::format("{}{}", host == 0 ? "" : ";", placement.rank_list_on(host));
  return list;
}

// PMIX_NODE_MAP / PMIX_PROC_MAP in PMIx's own regex form; skipped if PMIx cannot make one.
void add_maps(InfoList& info, const Placement& placement) {
  char* node_map = nullptr;
  if (PMIx_generate_regex(host_list(placement).c_str(), &node_map) == PMIX_SUCCESS && node_map != nullptr) {
    info.add_regex(PMIX_NODE_MAP, node_map);
  }
  std::free(node_map);
  char* proc_map = nullptr;
  if (PMIx_generate_ppn(ranks_per_host(placement).c_str(), &proc_map) == PMIX_SUCCESS && proc_map != nullptr) {
    info.add_regex(PMIX_PROC_MAP, proc_map);
  }
  std::free(proc_map);
}

void add_rank_info(InfoList& info, int rank, const Placement& placement) {
  InfoList proc;
  const auto id = static_cast<pmix_rank_t>(rank);
  const int host = placement.host_of(rank);
  proc.add_rank(PMIX_RANK, id);
  proc.add_rank(PMIX_GLOBAL_RANK, id);
  proc.add_u16(PMIX_LOCAL_RANK, static_cast<std::uint16_t>(placement.local_rank(rank)));
  proc.add_u16(PMIX_NODE_RANK, static_cast<std::uint16_t>(placement.local_rank(rank)));
  proc.add_u32(PMIX_APPNUM, 0);
  proc.add_u32(PMIX_NODEID, static_cast<std::uint32_t>(host));
  proc.add_text(PMIX_HOSTNAME, placement.host_name(host));
  info.add_list(PMIX_PROC_INFO_ARRAY, proc);
}

void add_node_info(InfoList& info, const Placement& placement, int host) {
  InfoList node;
  auto ranks = placement.ranks_on(host);
  node.add_text(PMIX_HOSTNAME, placement.host_name(host));
  node.add_u32(PMIX_NODEID, static_cast<std::uint32_t>(host));
  node.add_u32(PMIX_LOCAL_SIZE, static_cast<std::uint32_t>(ranks.size()));
  node.add_u32(PMIX_NODE_SIZE, static_cast<std::uint32_t>(ranks.size()));
  node.add_rank(PMIX_LOCALLDR, static_cast<pmix_rank_t>(ranks.empty() ? 0 : ranks.front()));
  node.add_text(PMIX_LOCAL_PEERS, placement.rank_list_on(host));
  info.add_list(PMIX_NODE_INFO_ARRAY, node);
}

}  // namespace

void InfoList::add(const char* key, const void* value, pmix_data_type_t type) {
  pmix_status_t rc = PMIx_Info_list_add(list_, key, value, type);
  if (rc != PMIX_SUCCESS) log::warn("launch", "PMIx_Info_list_add({}) failed: {}", key, pmix::status_text(rc));
}

InfoArray InfoList::to_array() {
  InfoArray array;
  pmix_status_t rc = PMIx_Info_list_convert(list_, array.raw());
  if (rc != PMIX_SUCCESS && rc != PMIX_ERR_EMPTY) {
    log::warn("launch", "PMIx_Info_list_convert failed: {}", pmix::status_text(rc));
  }
  return array;
}

Expected<std::unique_ptr<InfoList>> job_info(const std::string& job_id, const Placement& placement) {
  auto info = std::make_unique<InfoList>();
  const auto size = static_cast<std::uint32_t>(placement.ranks());
  info->add_text(PMIX_JOBID, job_id);
  info->add_u32(PMIX_UNIV_SIZE, size);
  info->add_u32(PMIX_JOB_SIZE, size);
  info->add_u32(PMIX_MAX_PROCS, size);
  info->add_u32(PMIX_NUM_NODES, static_cast<std::uint32_t>(placement.host_count()));
  info->add_u32(PMIX_JOB_NUM_APPS, 1);
  if (placement.host_count() == 1) {  // the server's own node: job-level local values
    info->add_u32(PMIX_LOCAL_SIZE, size);
    info->add_text(PMIX_LOCAL_PEERS, placement.rank_list_on(0));
    info->add_text(PMIX_HOSTNAME, placement.host_name(0));
  }
  add_maps(*info, placement);
  for (int host = 0; host < placement.host_count(); ++host) add_node_info(*info, placement, host);
  for (int rank = 0; rank < placement.ranks(); ++rank) add_rank_info(*info, rank, placement);
  return info;
}

}  // namespace tether::launch
