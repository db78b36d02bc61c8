// select_part(): the file selection of a piece or of a contiguous range of one.
//
// A piece is row-major [outer, sections, piece, inner]; each "block" (piece x inner elements,
// one (outer, section) pair) is one contiguous run of the logical tensor. A range of the piece
// is at most a partial block, a run of whole blocks and a partial block. Whole blocks of a
// range of outer indices (all sections, or a range of them) are strided hyperslabs; a partial
// block is a contiguous logical run. A contiguous run of an N-d row-major array is at most
// 2N - 1 boxes (a partial row, whole rows, a partial row, recursively), so a range costs a
// small, fixed number of hyperslabs whatever its length.
#include "tensor_file_impl.hpp"

namespace trellis::tensor_file {

namespace {

struct Box {
  std::vector<hsize_t> start, stride, count, block;
};

// Boxes (stride 1, block 1 on every dim) covering the row-major run [a, b) of the sub-array
// dims[axis..] at the fixed coordinates at[0..axis).
void run_boxes(const std::vector<hsize_t>& dims, std::size_t axis, std::vector<hsize_t>& at,
               hsize_t a, hsize_t b, std::vector<Box>& out) {
  if (a >= b) return;
  hsize_t row = 1;  // elements of one index along `axis`
  for (std::size_t k = axis + 1; k < dims.size(); ++k) row *= dims[k];
  const hsize_t first = a / row, last = b / row;
  auto whole_rows = [&](hsize_t from, hsize_t to) {
    Box box;
    box.start.assign(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(axis));
    box.count.assign(axis, 1);
    box.start.push_back(from);
    box.count.push_back(to - from);
    for (std::size_t k = axis + 1; k < dims.size(); ++k) {
      box.start.push_back(0);
      box.count.push_back(dims[k]);
    }
    box.stride.assign(dims.size(), 1);
    box.block.assign(dims.size(), 1);
    out.push_back(std::move(box));
  };
  auto partial_row = [&](hsize_t index, hsize_t from, hsize_t to) {
    at[axis] = index;
    run_boxes(dims, axis + 1, at, from, to, out);
  };
  if (first == last) {
    partial_row(first, a % row, b % row);
    return;
  }
  hsize_t whole_from = first;
  if (a % row != 0) {
    partial_row(first, a % row, row);
    ++whole_from;
  }
  if (last > whole_from) whole_rows(whole_from, last);
  if (b % row != 0) partial_row(last, 0, b % row);
}

std::vector<Box> run_boxes(const std::vector<hsize_t>& dims, hsize_t a, hsize_t b) {
  std::vector<Box> out;
  std::vector<hsize_t> at(dims.size(), 0);
  if (dims.empty()) {
    if (a < b) out.push_back(Box{});  // the scalar
    return out;
  }
  run_boxes(dims, 0, at, a, b, out);
  return out;
}

// The piece's geometry in the logical tensor.
struct PieceLayout {
  std::vector<hsize_t> dims;  // logical
  std::size_t dim = 0;
  hsize_t sections = 1, parts = 1, index = 0, piece = 0, inner = 1;
  hsize_t block() const { return piece * inner; }
};

// Whole blocks of outer indices [o0, o1), sections [s0, s1) each.
void block_boxes(const PieceLayout& l, hsize_t o0, hsize_t o1, hsize_t s0, hsize_t s1,
                 std::vector<Box>& out) {
  if (o0 >= o1 || s0 >= s1) return;
  const std::vector<hsize_t> outer(l.dims.begin(),
                                   l.dims.begin() + static_cast<std::ptrdiff_t>(l.dim));
  for (Box box : run_boxes(outer, o0, o1)) {
    box.stride.assign(l.dim, 1);
    box.block.assign(l.dim, 1);
    box.start.push_back((s0 * l.parts + l.index) * l.piece);
    box.stride.push_back(l.parts * l.piece);
    box.count.push_back(s1 - s0);
    box.block.push_back(l.piece);
    for (std::size_t k = l.dim + 1; k < l.dims.size(); ++k) {
      box.start.push_back(0);
      box.stride.push_back(1);
      box.count.push_back(l.dims[k]);
      box.block.push_back(1);
    }
    out.push_back(std::move(box));
  }
}

// Elements [u, v) of block k (0 <= u < v <= block()): one contiguous logical run.
void partial_block_boxes(const PieceLayout& l, hsize_t k, hsize_t u, hsize_t v,
                         std::vector<Box>& out) {
  const hsize_t o = k / l.sections, s = k % l.sections;
  const hsize_t base = ((o * l.sections + s) * l.parts + l.index) * l.block();
  for (Box& box : run_boxes(l.dims, base + u, base + v)) out.push_back(std::move(box));
}

// Boxes of piece elements [b, e) of a sharded piece.
std::vector<Box> range_boxes(const PieceLayout& l, hsize_t b, hsize_t e) {
  std::vector<Box> out;
  const hsize_t B = l.block();
  if (b >= e || B == 0) return out;
  const hsize_t k_first = b / B, k_last = (e - 1) / B;
  if (k_first == k_last) {
    partial_block_boxes(l, k_first, b % B, e - k_first * B, out);
    return out;
  }
  hsize_t k0 = k_first, k1 = k_last + 1;  // whole blocks [k0, k1)
  if (b % B != 0) {
    partial_block_boxes(l, k_first, b % B, B, out);
    ++k0;
  }
  const bool tail = e % B != 0;
  if (tail) --k1;
  if (k0 < k1) {
    const hsize_t S = l.sections;
    hsize_t o0 = k0 / S, s0 = k0 % S;
    const hsize_t o1 = k1 / S, s1 = k1 % S;
    if (o0 == o1) {
      block_boxes(l, o0, o0 + 1, s0, s1, out);
    } else {
      if (s0 != 0) {
        block_boxes(l, o0, o0 + 1, s0, S, out);
        ++o0;
      }
      block_boxes(l, o0, o1, 0, S, out);
      block_boxes(l, o1, o1 + 1, 0, s1, out);
    }
  }
  if (tail) partial_block_boxes(l, k_last, 0, e - k_last * B, out);
  return out;
}

void select_boxes(hid_t space, const std::vector<Box>& boxes) {
  if (boxes.empty()) {
    TRELLIS_H5(H5Sselect_none(space));
    return;
  }
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const Box& box = boxes[i];
    TRELLIS_H5(H5Sselect_hyperslab(space, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, box.start.data(),
                                   box.stride.data(), box.count.data(), box.block.data()));
  }
}

}  // namespace

namespace {

// The boxes of p's part; `all` instead when the part is the whole tensor.
std::vector<Box> part_boxes(const TensorPiece& p, bool& all) {
  all = false;
  const hsize_t begin = p.part_begin(), end = p.part_end();
  if (shape_numel(p.logical_shape) == 0 || begin == end) return {};
  const std::vector<hsize_t> dims(p.logical_shape.begin(), p.logical_shape.end());
  if (!p.shard.sharded()) {
    if (p.whole_piece() || dims.empty()) {
      all = true;
      return {};
    }
    std::vector<Box> boxes = run_boxes(dims, begin, end);
    for (Box& box : boxes) {
      box.stride.assign(dims.size(), 1);
      box.block.assign(dims.size(), 1);
    }
    return boxes;
  }
  PieceLayout l;
  l.dims = dims;
  l.dim = static_cast<std::size_t>(p.shard.dim);
  l.sections = static_cast<hsize_t>(p.shard.sections);
  l.parts = static_cast<hsize_t>(p.shard.parts);
  l.index = static_cast<hsize_t>(p.shard.index);
  l.piece = dims[l.dim] / (l.sections * l.parts);
  for (std::size_t k = l.dim + 1; k < dims.size(); ++k) l.inner *= dims[k];
  return range_boxes(l, begin, end);
}

}  // namespace

void select_part(hid_t space, const TensorPiece* p) {
  select_parts(
      space, p == nullptr ? std::vector<const TensorPiece*>{} : std::vector<const TensorPiece*>{p});
}

void select_parts(hid_t space, const std::vector<const TensorPiece*>& parts) {
  std::vector<Box> boxes;
  for (const TensorPiece* p : parts) {
    bool all = false;
    std::vector<Box> more = part_boxes(*p, all);
    if (all) {
      TRELLIS_H5(H5Sselect_all(space));
      return;
    }
    for (Box& box : more) boxes.push_back(std::move(box));
  }
  select_boxes(space, boxes);
}

}  // namespace trellis::tensor_file
