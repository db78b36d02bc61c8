// SampleDataset: a labelled sample dataset (images, feature vectors) stored in one or more
// HDF5 files, read in parallel: every rank opens every shard, and reads only its samples.
//
// ---- File format "trellis.samples", version 1 (also in docs/data-formats.md) -------------
//
//   /samples   uint8 or float32, shape [N, ...] (one sample is [C, H, W], [D], ...; rank >= 2),
//              chunked by rows (1024 rows per chunk by default)
//   /labels    int32 (uint8 also accepted), shape [N], values in [0, num_classes)
//   attributes of the root group:
//     format          string   "trellis.samples"
//     format_version  integer  1
//     num_classes     integer  > 0
//     scale           float    raw value multiplier, e.g. 1/255 for uint8 pixels
//     mean, std       float[1] or float[C] (C = first axis of a sample; std > 0)
//     source          string   optional provenance, e.g. "fashion-mnist (train)"
//
//   The reader hands out x = (raw * scale - mean[c]) / std[c] as float32, c = channel
//   (computed as raw * (scale/std) + (-mean/std), i.e. within float rounding of the formula).
//   Test files carry the training set's mean/std so that both are normalised alike.
//
//   One logical dataset may be split into K shard files <stem>-00000-of-0000K.h5 ... (see
//   shard_paths.hpp); they are concatenated in name order: global index = offset of the
//   shard + row. Shards must agree on sample shape, dtype, num_classes and normalisation.
//   Integer attributes may be any integer width, float ones float32 or float64, strings
//   fixed or variable length: h5py's defaults are fine.
//
// Every violation throws InputError "<file>: <dataset or attribute>: expected ..., found ...".
//
// Not thread-safe (one thread per dataset, and HDF5 itself is usually not thread-safe).
#pragma once

#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/data/sample_format.hpp"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

class SampleDataset {
 public:
  // Collective over comm: every rank must call open with the same arguments. `spec` is one
  // file or a glob of shards ("data/fmnist/train-*.h5"); a list is concatenated in order.
  // Throws InputError for missing, unreadable or invalid files; ConfigError for a tuning
  // that is unsafe (collective metadata reads without collective transfer).
  static SampleDataset open(const std::string& spec, MPI_Comm comm,
                            const Hdf5Tuning& tuning = Hdf5Tuning{});
  static SampleDataset open(const std::vector<std::string>& specs, MPI_Comm comm,
                            const Hdf5Tuning& tuning = Hdf5Tuning{});

  SampleDataset(SampleDataset&&) noexcept;
  SampleDataset& operator=(SampleDataset&&) noexcept;
  ~SampleDataset();  // collective over the open communicator (HDF5 closes MPI-IO files together)

  std::int64_t size() const;          // N summed over shards
  const Shape& sample_shape() const;  // one sample, e.g. [1, 28, 28]
  std::int64_t sample_numel() const;  // e.g. 784
  int num_classes() const;
  SampleDType sample_dtype() const;  // as stored; read() always gives float32
  const Normalization& normalization() const;
  const std::string& source() const;  // "" when the file has none
  std::size_t shard_count() const;
  const std::string& shard_path(std::size_t shard) const;

  // Reads the samples global_indices[0..n) in that order (duplicates allowed):
  //   out        [n, sample_numel()]  normalised float32
  //   labels_out [n]                  int32 in [0, num_classes)
  // Indices are sorted and de-duplicated, consecutive rows merged into runs (one hyperslab
  // block each); rows are read per run, or with one H5Dread per touched shard over the
  // union of its blocks (Hdf5Tuning::one_read_per_shard, always with collective transfer),
  // then scattered into the requested order and normalised. Scratch buffers are kept, so
  // repeated reads of the same batch size do not allocate (HDF5 itself still may).
  // Collective when tuning.collective_transfer is set, independent otherwise.
  // Throws InputError naming file, global index and value for a label outside
  // [0, num_classes), and Error for an index outside [0, size()).
  void read(const std::vector<std::int64_t>& global_indices, float* out, std::int32_t* labels_out);

  // Reads the whole dataset into this rank's memory (one H5Dread per shard for /samples and
  // one for /labels), after which read() serves every batch from memory without HDF5 calls.
  // For datasets that fit in RAM many times over (config data.cache = memory): it trades the
  // per-step hyperslab reads (~10 us per sample) for N * sample bytes per rank. Collective
  // when tuning.collective_transfer is set.
  void cache_in_memory();
  bool cached() const;

 private:
  struct Impl;
  explicit SampleDataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trellis
