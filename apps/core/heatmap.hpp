// --png FILE: a heat map of field 0 (the middle z plane in 3D), at most 800 pixels on
// a side. Each rank samples the pixels whose cell it owns; rank 0 merges and writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/core/block.hpp"
#include "apps/core/problem.hpp"

namespace tether::apps {

inline constexpr std::int64_t kHeatmapMaxSide = 800;

struct HeatmapSize {
  std::int64_t width = 1;
  std::int64_t height = 1;
};
[[nodiscard]] HeatmapSize heatmap_size(const Problem& problem);

// width x height values, row 0 = lowest y; NaN where another rank owns the cell.
[[nodiscard]] std::vector<double> sample_heatmap(const Block& block, const Problem& problem);

// Takes, per pixel, the one rank that sampled it.
[[nodiscard]] std::vector<double> merge_heatmaps(const std::vector<double>& all_ranks, std::size_t pixels);

// Whether `path` can be written (a file we may write, or a new one in a directory we may
// write into), checked before a run so a bad path costs no run; nothing is created.
[[nodiscard]] Expected<void> png_path_writable(const std::string& path);

// Writes an 8-bit RGB PNG through libpng, colours spanning the field's min to max.
[[nodiscard]] Expected<void> write_heatmap_png(const std::string& path, const std::vector<double>& values,
                                               HeatmapSize size);

}  // namespace tether::apps
