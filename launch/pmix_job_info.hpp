// InfoList: builds pmix_info_t arrays (PMIx_Info_list_*); job_info(): what tether-run tells
// PMIx about the job (sizes, local peers, node and per-rank data).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <pmix_server.h>

#include "launch/placement.hpp"
#include "tether/error.hpp"

namespace tether::launch {

// An owned pmix_data_array_t of pmix_info_t.
class InfoArray {
 public:
  InfoArray() { PMIX_DATA_ARRAY_CONSTRUCT(&array_, 0, PMIX_INFO); }
  InfoArray(InfoArray&& other) noexcept : array_(other.array_) { PMIX_DATA_ARRAY_CONSTRUCT(&other.array_, 0, PMIX_INFO); }
  InfoArray& operator=(InfoArray&&) = delete;
  InfoArray(const InfoArray&) = delete;
  ~InfoArray() { PMIX_DATA_ARRAY_DESTRUCT(&array_); }

  [[nodiscard]] pmix_info_t* info() { return static_cast<pmix_info_t*>(array_.array); }
  [[nodiscard]] std::size_t count() const { return array_.size; }
  [[nodiscard]] pmix_data_array_t* raw() { return &array_; }

 private:
  pmix_data_array_t array_;
};

class InfoList {
 public:
  InfoList() : list_(PMIx_Info_list_start()) {}
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;
  ~InfoList() { PMIx_Info_list_release(list_); }

  void add_text(const char* key, const std::string& value) { add(key, value.c_str(), PMIX_STRING); }
  void add_regex(const char* key, const char* value) { add(key, value, PMIX_REGEX); }
  void add_flag(const char* key, bool value) { add(key, &value, PMIX_BOOL); }
  void add_u32(const char* key, std::uint32_t value) { add(key, &value, PMIX_UINT32); }
  void add_u16(const char* key, std::uint16_t value) { add(key, &value, PMIX_UINT16); }
  void add_int(const char* key, int value) { add(key, &value, PMIX_INT); }
  void add_rank(const char* key, pmix_rank_t value) { add(key, &value, PMIX_PROC_RANK); }
  void add_proc(const char* key, const pmix_proc_t& value) { add(key, &value, PMIX_PROC); }
  void add_list(const char* key, InfoList& nested) {
    InfoArray array = nested.to_array();
    add(key, array.raw(), PMIX_DATA_ARRAY);
  }
  [[nodiscard]] InfoArray to_array();

 private:
  void add(const char* key, const void* value, pmix_data_type_t type);
  void* list_;
};

// The job-level, node-level and per-rank information for PMIx_server_register_nspace.
Expected<std::unique_ptr<InfoList>> job_info(const std::string& job_id, const Placement& placement);

}  // namespace tether::launch
