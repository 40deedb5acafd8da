// One rank's share of the grid: `fields` arrays of its cells plus ghost layers of width
// `radius` on the active axes, two copies (current and next) swapped every iteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include "apps/core/decomposition.hpp"
#include "apps/core/problem.hpp"

namespace tether::apps {

// A box of local cell indices, half-open; indices may be negative (ghosts).
struct Box {
  Cells3 lo{0, 0, 0};
  Cells3 hi{0, 0, 0};
  [[nodiscard]] std::int64_t cells() const { return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]); }
};

// Doubles in one 64-byte cache line, and counts of doubles rounded to whole lines.
inline constexpr std::int64_t kDoublesPerLine = 64 / sizeof(double);
[[nodiscard]] constexpr std::int64_t round_up_to_line(std::int64_t doubles) {
  return (doubles + kDoublesPerLine - 1) / kDoublesPerLine * kDoublesPerLine;
}
[[nodiscard]] constexpr std::int64_t round_down_to_line(std::int64_t doubles) {
  return doubles / kDoublesPerLine * kDoublesPerLine;
}

// Hands out storage starting on a cache line, so a row that starts on one stays there.
template <class T>
struct LineAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  LineAlignedAllocator() = default;
  template <class U>
  explicit LineAlignedAllocator(const LineAlignedAllocator<U>&) noexcept {}
  T* allocate(std::size_t count) { return static_cast<T*>(::operator new(count * sizeof(T), kAlignment)); }
  void deallocate(T* pointer, std::size_t) noexcept { ::operator delete(pointer, kAlignment); }
  friend bool operator==(const LineAlignedAllocator&, const LineAlignedAllocator&) noexcept { return true; }
};

// Each row of a field starts its owned cells (x = 0) on a 64-byte line: the row's x ghosts
// sit in the padding before it, and the row stride is a whole number of lines. The wide
// stencil copy then loads whole lines.
class Block {
 public:
  Block(const Problem& problem, int rank);

  [[nodiscard]] const Cells3& offset() const { return offset_; }   // first owned global cell
  [[nodiscard]] const Cells3& extent() const { return extent_; }   // owned cells per axis
  [[nodiscard]] const Cells3& ghost() const { return ghost_; }     // ghost width per axis
  [[nodiscard]] std::int64_t owned_cells() const { return extent_[0] * extent_[1] * extent_[2]; }
  [[nodiscard]] Box owned_box() const { return Box{{0, 0, 0}, extent_}; }
  [[nodiscard]] int fields() const { return fields_; }

  // Element offset of local cell (x, y, z) inside one field; ghosts have negative indices.
  [[nodiscard]] std::size_t index(std::int64_t x, std::int64_t y, std::int64_t z) const {
    return static_cast<std::size_t>((x + lead_x_) + stride_y_ * (y + ghost_[1]) + stride_z_ * (z + ghost_[2]));
  }
  [[nodiscard]] std::int64_t stride_y() const { return stride_y_; }
  [[nodiscard]] std::int64_t stride_z() const { return stride_z_; }

  [[nodiscard]] double* current(int field) { return current_.data() + field_offset(field); }
  [[nodiscard]] const double* current(int field) const { return current_.data() + field_offset(field); }
  [[nodiscard]] double* next(int field) { return next_.data() + field_offset(field); }
  void swap_current_and_next() { current_.swap(next_); }

  // Owned cells sent across `face` (depth = radius) and the ghost cells filled from it.
  [[nodiscard]] Box send_box(int face) const;
  [[nodiscard]] Box ghost_box(int face) const;
  // Doubles in one face message: every field's cells of send_box(face).
  [[nodiscard]] std::size_t face_doubles(int face) const;

  void pack(int face, std::span<double> buffer) const;
  void unpack(int face, std::span<const double> buffer);
  // Ghosts beyond the global edge mirror the owned cells with the sign flipped (odd
  // reflection), so a sine that vanishes one cell outside the grid stays an eigenvector.
  void reflect_at_edge(int face);
  // The x ghosts of one row by the same rule, `edge` pointing at cell x = 0 (low) or at
  // x = extent, one past the last owned cell (high).
  static void reflect_row_across_x(double* edge, std::int64_t radius, bool high) noexcept {
    if (radius == 0) return;
    if (high) {
      edge[0] = 0.0;
      for (std::int64_t depth = 1; depth < radius; ++depth) edge[depth] = -edge[-depth];
    } else {
      edge[-1] = 0.0;
      for (std::int64_t depth = 1; depth < radius; ++depth) edge[-1 - depth] = -edge[depth - 1];
    }
  }

 private:
  [[nodiscard]] std::size_t field_offset(int field) const { return static_cast<std::size_t>(field) * field_cells_; }
  void reflect_layer(int face, std::int64_t depth);
  void reflect_across_x(bool high);

  Cells3 offset_{}, extent_{}, ghost_{};
  std::int64_t lead_x_ = 0;  // elements before x = 0 in a row: the x ghosts, rounded up to a line
  std::int64_t stride_y_ = 0, stride_z_ = 0;
  std::size_t field_cells_ = 0;
  int radius_ = 0;
  int fields_ = 0;
  std::vector<double, LineAlignedAllocator<double>> current_, next_;
};

// Calls visit(x, y, z) over `box` with x innermost.
template <class Visit>
void for_each_cell(const Box& box, Visit&& visit) {
  for (std::int64_t z = box.lo[2]; z < box.hi[2]; ++z)
    for (std::int64_t y = box.lo[1]; y < box.hi[1]; ++y)
      for (std::int64_t x = box.lo[0]; x < box.hi[0]; ++x) visit(x, y, z);
}

}  // namespace tether::apps
