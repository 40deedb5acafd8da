// What tether-run registers for its job: one node, ranks 0..N-1, all of them local.
#include "launch/pmix_job_info.hpp"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/bootstrap/pmix_values.hpp"

namespace tether::launch {
namespace {

std::string this_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string rank_list(int ranks) {
  std::string list;
  for (int rank = 0; rank < ranks; ++rank) list += fmt::format("{}{}", rank == 0 ? "" : ",", rank);
  return list;
}

// PMIX_NODE_MAP / PMIX_PROC_MAP in PMIx's own regex form; skipped if PMIx cannot make one.
void add_maps(InfoList& info, const std::string& hostname, const std::string& ranks) {
  char* node_map = nullptr;
  if (PMIx_generate_regex(hostname.c_str(), &node_map) == PMIX_SUCCESS && node_map != nullptr) {
    info.add_regex(PMIX_NODE_MAP, node_map);
  }
  std::free(node_map);
  char* proc_map = nullptr;
  if (PMIx_generate_ppn(ranks.c_str(), &proc_map) == PMIX_SUCCESS && proc_map != nullptr) {
    info.add_regex(PMIX_PROC_MAP, proc_map);
  }
  std::free(proc_map);
}

void add_rank_info(InfoList& info, int rank, const std::string& hostname) {
  InfoList proc;
  const auto id = static_cast<pmix_rank_t>(rank);
  proc.add_rank(PMIX_RANK, id);
  proc.add_rank(PMIX_GLOBAL_RANK, id);
  proc.add_u16(PMIX_LOCAL_RANK, static_cast<std::uint16_t>(rank));
  proc.add_u16(PMIX_NODE_RANK, static_cast<std::uint16_t>(rank));
  proc.add_u32(PMIX_APPNUM, 0);
  proc.add_u32(PMIX_NODEID, 0);
  proc.add_text(PMIX_HOSTNAME, hostname);
  info.add_list(PMIX_PROC_INFO_ARRAY, proc);
}

void add_node_info(InfoList& info, int ranks, const std::string& hostname, const std::string& peers) {
  InfoList node;
  node.add_text(PMIX_HOSTNAME, hostname);
  node.add_u32(PMIX_NODEID, 0);
  node.add_u32(PMIX_LOCAL_SIZE, static_cast<std::uint32_t>(ranks));
  node.add_u32(PMIX_NODE_SIZE, static_cast<std::uint32_t>(ranks));
  node.add_rank(PMIX_LOCALLDR, 0);
  node.add_text(PMIX_LOCAL_PEERS, peers);
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

Expected<std::unique_ptr<InfoList>> job_info(const std::string& job_id, int ranks) {
  auto info = std::make_unique<InfoList>();
  const std::string hostname = this_hostname();
  const std::string peers = rank_list(ranks);
  const auto size = static_cast<std::uint32_t>(ranks);
  info->add_text(PMIX_JOBID, job_id);
  info->add_u32(PMIX_UNIV_SIZE, size);
  info->add_u32(PMIX_JOB_SIZE, size);
  info->add_u32(PMIX_MAX_PROCS, size);
  info->add_u32(PMIX_LOCAL_SIZE, size);
  info->add_u32(PMIX_NUM_NODES, 1);
  info->add_u32(PMIX_JOB_NUM_APPS, 1);
  info->add_text(PMIX_LOCAL_PEERS, peers);
  info->add_text(PMIX_HOSTNAME, hostname);
  add_maps(*info, hostname, peers);
  add_node_info(*info, ranks, hostname, peers);
  for (int rank = 0; rank < ranks; ++rank) add_rank_info(*info, rank, hostname);
  return info;
}

}  // namespace tether::launch
