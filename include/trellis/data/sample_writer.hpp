// Writes "trellis.samples" files (format in sample_dataset.hpp) from memory: for tests, for
// tools that generate synthetic data, and as the C++ twin of tools/idx_to_hdf5.py.
// Serial (one process writes; others wait at a barrier before reading).
#pragma once

#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/data/sample_format.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

// samples: [n, numel(spec.sample_shape)] elements of spec.dtype (std::uint8_t or float),
// labels: [n] in [0, spec.num_classes). Chunks of tuning.chunk_rows rows; replaces `path`.
void write_sample_file(const std::string& path, const SampleFileSpec& spec, const void* samples,
                       const std::int32_t* labels, std::int64_t n,
                       const Hdf5Tuning& tuning = Hdf5Tuning{});

// Splits the rows into `shards` files <stem>-0000i-of-0000K.h5, shard i holding rows
// [floor(i*n/K), floor((i+1)*n/K)) (the converter splits the same way). Returns the paths.
std::vector<std::string> write_sample_shards(const std::string& stem, int shards,
                                             const SampleFileSpec& spec, const void* samples,
                                             const std::int32_t* labels, std::int64_t n,
                                             const Hdf5Tuning& tuning = Hdf5Tuning{});

}  // namespace trellis
