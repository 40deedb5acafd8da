// CHECK for programs that run as the ranks of a job: a failed check prints the line, the
// condition and a formatted detail, and counts; the program exits non-zero when any failed.
#pragma once

#include <cstdio>

#include <fmt/format.h>

namespace tether::testing {
inline int g_rank_check_failures = 0;
[[nodiscard]] inline bool rank_checks_passed() { return g_rank_check_failures == 0; }
}  // namespace tether::testing

#define CHECK(condition, ...)                                                                       \
  do {                                                                                              \
    if (!(condition)) {                                                                             \
      ++::tether::testing::g_rank_check_failures;                                                   \
      fmt::print(stderr, "rank check failed at line {}: {} ({})\n", __LINE__, #condition,          \
                 fmt::format(__VA_ARGS__));                                                         \
    }                                                                                               \
  } while (0)
