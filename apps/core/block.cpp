#include "apps/core/block.hpp"

namespace tether::apps {

Block::Block(const Problem& problem, int rank) : radius_(problem.radius), fields_(problem.fields) {
  Procs3 coords = coords_of(rank, problem.procs);
  for (int axis = 0; axis < kMaxDims; ++axis) {
    Extent range = block_extent(problem.global_cells[axis], problem.procs[axis], coords[axis]);
    offset_[axis] = range.begin;
    extent_[axis] = range.count;
    ghost_[axis] = axis < problem.dims ? problem.radius : 0;
  }
  stride_y_ = extent_[0] + 2 * ghost_[0];
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

void Block::pack(int face, std::span<double> buffer) const {
  Box box = send_box(face);
  std::size_t at = 0;
  for (int field = 0; field < fields_; ++field) {
    const double* values = current(field);
    for_each_cell(box, [&](std::int64_t x, std::int64_t y, std::int64_t z) { buffer[at++] = values[index(x, y, z)]; });
  }
}

void Block::unpack(int face, std::span<const double> buffer) {
  Box box = ghost_box(face);
  std::size_t at = 0;
  for (int field = 0; field < fields_; ++field) {
    double* values = current(field);
    for_each_cell(box, [&](std::int64_t x, std::int64_t y, std::int64_t z) { values[index(x, y, z)] = buffer[at++]; });
  }
}

void Block::reflect_at_edge(int face) {
  int axis = face_axis(face);
  bool high = face_is_high(face);
  // Ghost at depth d (0 = touching the grid) mirrors the owned cell d - 1 deep, negated;
  // depth 0 mirrors itself and is therefore 0.
  Box box = ghost_box(face);
  for (int field = 0; field < fields_; ++field) {
    double* values = current(field);
    for_each_cell(box, [&](std::int64_t x, std::int64_t y, std::int64_t z) {
      Cells3 ghost_cell{x, y, z}, mirror{x, y, z};
      std::int64_t depth = high ? ghost_cell[axis] - extent_[axis] : -1 - ghost_cell[axis];
      if (depth == 0) {
        values[index(x, y, z)] = 0.0;
        return;
      }
      mirror[axis] = high ? extent_[axis] - depth : depth - 1;
      values[index(x, y, z)] = -values[index(mirror[0], mirror[1], mirror[2])];
    });
  }
}

}  // namespace tether::apps
