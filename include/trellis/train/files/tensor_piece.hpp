// TensorPiece: one logical tensor of a trellis HDF5 tensor file (checkpoint, model weights)
// and this rank's part of it, plus the position-keyed checksum every such file stores.
//
// Checksum: additive and keyed by position, so every writer hashes only its own part and the
// parts are summed with MPI_Allreduce; any split of a tensor (tp pieces, ZeRO-1 ranges of
// them) gives the same sum:
//   checksum = sum over logical (row-major) element indices i of
//              checkpoint_mix(i, bits(value_i))  (mod 2^64)
//   checkpoint_mix(i, b) = splitmix64(i * 0x9E3779B97F4A7C15 ^ b), where (all mod 2^64)
//   splitmix64(x): z = x + 0x9E3779B97F4A7C15; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
//                  z = (z ^ z >> 27) * 0x94D049BB133111EB; return z ^ z >> 31
// bits() is the IEEE float32 bit pattern (as stored, little-endian). For a fixed i the map
// b -> mix is a bijection, so changing any bits of one element always changes the checksum; a
// piece written to the wrong place almost surely changes it too (the index is in every term).
// It is not a cryptographic hash. (Checked against an independent Python implementation.)
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/shape.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace trellis {

struct TensorPiece {
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  std::string name;     // dataset path in the file, e.g. "params/fc1.weight", "optim/exp_avg/x"
  Shape logical_shape;  // the whole tensor's shape ([] = a scalar)
  nn::ShardSpec shard;  // how the piece maps into the logical tensor; !sharded(): the whole
                        // tensor is the piece
  // The part of the piece this rank holds: elements [range_begin, range_end) of the piece in
  // its row-major order [outer, sections, piece, inner] (ZeRO-1 optimizer state: a dp rank's
  // contiguous share of its tp piece). range_end = npos: the whole piece.
  std::size_t range_begin = 0;
  std::size_t range_end = npos;
  bool writer = false;  // writers: whether this rank writes its part. The caller makes exactly
                        // one writer per element (checked: the writers' parts must add up to
                        // the tensor's element count)
  FloatView local;      // [range length (whole piece: numel of the piece)], row-major as above;
                        // written from (writers) / read into (every rank that holds it)
  bool held = true;     // false: this rank holds no part (another pipeline stage's tensor): it
                        // only takes part in the collective calls; writer must be false and
                        // `local` is not used. Optional: a rank may also leave such tensors out
                        // of its list (the file gets the union of all ranks' lists).

  // Elements of the piece (shard.piece_shape). Throws Error for a bad shape or spec.
  std::size_t piece_numel() const;
  // [begin, end) of the part within the piece (npos resolved). Throws Error when out of range.
  std::size_t part_begin() const;
  std::size_t part_end() const;
  bool whole_piece() const { return range_begin == 0 && range_end == npos; }
};

// splitmix64(index * 0x9E3779B97F4A7C15 ^ bits): one term of the checksum.
inline std::uint64_t checkpoint_mix(std::uint64_t index, std::uint32_t bits) {
  std::uint64_t z = (index * 0x9E3779B97F4A7C15ull ^ bits) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Sum of checkpoint_mix(map(first + e), bits(values[e])) over e < count (mod 2^64): the terms
// of `count` piece elements starting at piece element `first`.
std::uint64_t checkpoint_checksum(const float* values, std::size_t count,
                                  const kernels::ShardIndexMap& map = {}, std::size_t first = 0);

}  // namespace trellis
