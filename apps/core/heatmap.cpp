#include "apps/core/heatmap.hpp"

#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace tether::apps {
namespace {

using Rgb = std::array<std::uint8_t, 3>;
constexpr const char* kPngPathRemedy = "pass --png a path in a directory that exists and is writable";

// Black, deep red, orange, yellow, white: the usual heat scale, by linear pieces.
Rgb heat_colour(double t) {
  constexpr std::array<std::array<double, 3>, 5> stops{{{0, 0, 0}, {150, 20, 10}, {240, 110, 0}, {255, 220, 40}, {255, 255, 255}}};
  t = std::clamp(t, 0.0, 1.0) * (stops.size() - 1);
  std::size_t low = std::min<std::size_t>(static_cast<std::size_t>(t), stops.size() - 2);
  double fraction = t - static_cast<double>(low);
  Rgb colour{};
  for (std::size_t c = 0; c < 3; ++c)
    colour[c] = static_cast<std::uint8_t>(std::lround(stops[low][c] + fraction * (stops[low + 1][c] - stops[low][c])));
  return colour;
}

std::vector<std::uint8_t> colour_rows(const std::vector<double>& values, HeatmapSize size) {
  auto [low, high] = std::minmax_element(values.begin(), values.end());
  double span = *high - *low > 0 ? *high - *low : 1.0;
  std::vector<std::uint8_t> rgb(values.size() * 3);
  for (std::int64_t row = 0; row < size.height; ++row) {
    // PNG rows run top to bottom; the field's y grows upwards.
    std::int64_t source_row = size.height - 1 - row;
    for (std::int64_t column = 0; column < size.width; ++column) {
      double value = values[static_cast<std::size_t>(source_row * size.width + column)];
      Rgb colour = heat_colour((value - *low) / span);
      std::memcpy(&rgb[static_cast<std::size_t>((row * size.width + column) * 3)], colour.data(), 3);
    }
  }
  return rgb;
}

// libpng reports errors by longjmp; everything with a destructor lives in the caller.
bool write_png_rows(std::FILE* file, std::uint8_t* const* rows, HeatmapSize size) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(size.width), static_cast<png_uint_32>(size.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, const_cast<png_bytepp>(rows));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

HeatmapSize heatmap_size(const Problem& problem) {
  std::int64_t nx = problem.global_cells[0], ny = problem.global_cells[1];
  std::int64_t longest = std::max(nx, ny);
  if (longest <= kHeatmapMaxSide) return {nx, ny};
  return {std::max<std::int64_t>(1, nx * kHeatmapMaxSide / longest),
          std::max<std::int64_t>(1, ny * kHeatmapMaxSide / longest)};
}

std::vector<double> sample_heatmap(const Block& block, const Problem& problem) {
  HeatmapSize size = heatmap_size(problem);
  std::vector<double> pixels(static_cast<std::size_t>(size.width * size.height), std::numeric_limits<double>::quiet_NaN());
  std::int64_t z = problem.global_cells[2] / 2 - block.offset()[2];
  if (z < 0 || z >= block.extent()[2]) return pixels;
  const double* values = block.current(0);
  for (std::int64_t py = 0; py < size.height; ++py) {
    std::int64_t y = py * problem.global_cells[1] / size.height - block.offset()[1];
    if (y < 0 || y >= block.extent()[1]) continue;
    for (std::int64_t px = 0; px < size.width; ++px) {
      std::int64_t x = px * problem.global_cells[0] / size.width - block.offset()[0];
      if (x < 0 || x >= block.extent()[0]) continue;
      pixels[static_cast<std::size_t>(py * size.width + px)] = values[block.index(x, y, z)];
    }
  }
  return pixels;
}

std::vector<double> merge_heatmaps(const std::vector<double>& all_ranks, std::size_t pixels) {
  std::vector<double> merged(pixels, 0.0);
  for (std::size_t at = 0; at < all_ranks.size(); ++at) {
    if (!std::isnan(all_ranks[at])) merged[at % pixels] = all_ranks[at];
  }
  return merged;
}

Expected<void> png_path_writable(const std::string& path) {
  struct stat status {};
  bool exists = ::stat(path.c_str(), &status) == 0;
  if (exists && S_ISDIR(status.st_mode))
    return make_error(Errc::invalid_argument, fmt::format("--png {} is a directory", path),
                      "pass --png a file name, e.g. field.png");
  std::size_t slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::access(exists ? path.c_str() : directory.c_str(), exists ? W_OK : W_OK | X_OK) == 0) return {};
  int error = errno;
  return make_error(Errc::invalid_argument, fmt::format("cannot write {}: {}", path, std::strerror(error)),
                    kPngPathRemedy, error);
}

Expected<void> write_heatmap_png(const std::string& path, const std::vector<double>& values, HeatmapSize size) {
  std::vector<std::uint8_t> rgb = colour_rows(values, size);
  std::vector<std::uint8_t*> rows;
  for (std::int64_t row = 0; row < size.height; ++row) rows.push_back(&rgb[static_cast<std::size_t>(row * size.width * 3)]);
  struct stat before {};
  bool existed = ::stat(path.c_str(), &before) == 0;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    int error = errno;
    return make_error(Errc::invalid_argument, fmt::format("cannot open {} for writing: {}", path, std::strerror(error)),
                      kPngPathRemedy, error);
  }
  bool written = write_png_rows(file, rows.data(), size);
  bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    if (!existed) ::unlink(path.c_str());  // no half-written picture is left behind (nor a device removed)
    return make_error(Errc::invalid_argument, fmt::format("libpng could not write {}", path),
                      "check free space on that file system");
  }
  return {};
}

}  // namespace tether::apps
