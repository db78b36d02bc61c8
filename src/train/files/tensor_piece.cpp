#include "trellis/train/files/tensor_piece.hpp"

#include "trellis/core/error.hpp"

#include <cstring>

namespace trellis {

std::size_t TensorPiece::piece_numel() const {
  return static_cast<std::size_t>(shape_numel(shard.piece_shape(logical_shape)));
}

std::size_t TensorPiece::part_begin() const {
  part_end();  // validates
  return range_begin;
}

std::size_t TensorPiece::part_end() const {
  const std::size_t numel = piece_numel();
  const std::size_t end = range_end == npos ? numel : range_end;
  if (range_begin > end || end > numel)
    throw Error("tensor '" + name + "': range [" + std::to_string(range_begin) + ", " +
                std::to_string(end) + ") is outside its piece of " + std::to_string(numel) +
                " elements");
  return end;
}

std::uint64_t checkpoint_checksum(const float* values, std::size_t count,
                                  const kernels::ShardIndexMap& map, std::size_t first) {
  std::uint64_t sum = 0;
  for (std::size_t e = 0; e < count; ++e) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, values + e, sizeof bits);
    sum += checkpoint_mix(map(first + e), bits);
  }
  return sum;
}

}  // namespace trellis
