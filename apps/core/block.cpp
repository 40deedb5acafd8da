#include "apps/core/block.hpp"

#include <algorithm>

namespace tether::apps {

Block::Block(const Problem& problem, int rank) : radius_(problem.radius), fields_(problem.fields) {
  Procs3 coords = coords_of(rank, problem.procs);
  for (int axis = 0; axis < kMaxDims; ++axis) {
    Extent range = block_extent(problem.global_cells[axis], problem.procs[axis], coords[axis]);
    offset_[axis] = range.begin;
    extent_[axis] = range.count;
    ghost_[axis] = axis < problem.dims ? problem.radius : 0;
  }
  lead_x_ = round_up_to_line(ghost_[0]);
  stride_y_ = round_up_to_line(lead_x_ + extent_[0] + ghost_[0]);
  stride_z_ = stride_y_ * (extent_[1] + 2 * ghost_[1]);
  field_cells_ = static_cast<std::size_t>(stride_z_ * (extent_[2] + 2 * ghost_[2]));
  current_.assign(field_cells_ * static_cast<std::size_t>(fields_), 0.0);
  next_.assign(current_.size(), 0.0);
}

Box Block::send_box(int face) const {
  Box box{{0, 0, 0}, extent_};
  int axis = face_axis(face);
  if (face_is_high(face)) box.lo[axis] = extent_[axis] - radius_;
  else box.hi[axis] = radius_;
  return box;
}

Box Block::ghost_box(int face) const {
  Box box{{0, 0, 0}, extent_};
  int axis = face_axis(face);
  if (face_is_high(face)) {
    box.lo[axis] = extent_[axis];
    box.hi[axis] = extent_[axis] + radius_;
  } else {
    box.lo[axis] = -radius_;
    box.hi[axis] = 0;
  }
  return box;
}

std::size_t Block::face_doubles(int face) const {
  return static_cast<std::size_t>(send_box(face).cells()) * static_cast<std::size_t>(fields_);
}

namespace {

// A face across x is a column of rows only `radius` cells long: rows up to this many
// cells are copied in line rather than through a memmove call per row.
constexpr std::size_t kInlineCopyMaxCells = 4;

void copy_row(const double* from, std::size_t count, double* to) {
  if (count <= kInlineCopyMaxCells) {
    for (std::size_t i = 0; i < count; ++i) to[i] = from[i];
  } else {
    std::copy_n(from, count, to);
  }
}

void negate_row(const double* from, std::size_t count, double* to) {
  for (std::size_t i = 0; i < count; ++i) to[i] = -from[i];
}

// Calls visit(first, count) for each run of cells of `box` along x: `count` consecutive
// elements of a field of `block` starting at element `first`.
template <class Visit>
void for_each_row(const Block& block, const Box& box, Visit&& visit) {
  const auto count = static_cast<std::size_t>(box.hi[0] - box.lo[0]);
  for (std::int64_t z = box.lo[2]; z < box.hi[2]; ++z)
    for (std::int64_t y = box.lo[1]; y < box.hi[1]; ++y) visit(block.index(box.lo[0], y, z), count);
}

}  // namespace

void Block::pack(int face, std::span<double> buffer) const {
  Box box = send_box(face);
  double* out = buffer.data();
  for (int field = 0; field < fields_; ++field) {
    const double* values = current(field);
    for_each_row(*this, box, [&](std::size_t first, std::size_t count) {
      copy_row(values + first, count, out);
      out += count;
    });
  }
}

void Block::unpack(int face, std::span<const double> buffer) {
  Box box = ghost_box(face);
  const double* in = buffer.data();
  for (int field = 0; field < fields_; ++field) {
    double* values = current(field);
    for_each_row(*this, box, [&](std::size_t first, std::size_t count) {
      copy_row(in, count, values + first);
      in += count;
    });
  }
}

// Ghost at depth d (0 = touching the grid) mirrors the owned cell d - 1 deep, negated;
// depth 0 mirrors itself and is therefore 0.
void Block::reflect_at_edge(int face) {
  if (radius_ == 0) return;
  if (face_axis(face) == 0) return reflect_across_x(face_is_high(face));
  for (std::int64_t depth = 0; depth < radius_; ++depth) reflect_layer(face, depth);
}

// Along y or z the ghosts at one depth are a layer of whole rows, and their mirror layer
// sits a fixed number of elements away.
void Block::reflect_layer(int face, std::int64_t depth) {
  const int axis = face_axis(face);
  const bool high = face_is_high(face);
  Box layer = ghost_box(face);
  std::int64_t ghost_coordinate = high ? extent_[axis] + depth : -1 - depth;
  layer.lo[axis] = ghost_coordinate;
  layer.hi[axis] = ghost_coordinate + 1;
  std::int64_t mirror_coordinate = high ? extent_[axis] - depth : depth - 1;
  auto mirror_offset = static_cast<std::ptrdiff_t>((mirror_coordinate - ghost_coordinate) *
                                                   (axis == 1 ? stride_y_ : stride_z_));
  for (int field = 0; field < fields_; ++field) {
    double* values = current(field);
    for_each_row(*this, layer, [&](std::size_t first, std::size_t count) {
      double* ghost = values + first;
      if (depth == 0) std::fill_n(ghost, count, 0.0);
      else negate_row(ghost + mirror_offset, count, ghost);
    });
  }
}

// Across x the ghosts of a row are `radius` cells at one end of it: every depth at once,
// row by row.
void Block::reflect_across_x(bool high) {
  Box rows = ghost_box(high ? 1 : 0);
  rows.hi[0] = rows.lo[0] + 1;  // one visit per row
  const std::int64_t edge = high ? extent_[0] : 0;
  for (int field = 0; field < fields_; ++field) {
    double* values = current(field);
    for_each_row(*this, rows, [&](std::size_t first, std::size_t) {
      reflect_row_across_x(values + first + (edge - rows.lo[0]), radius_, high);  // cell x = edge of this row
    });
  }
}

}  // namespace tether::apps
