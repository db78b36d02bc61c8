// Private state of SampleDataset, shared by sample_dataset.cpp (open) and
// sample_dataset_read.cpp (read). Not installed: nothing outside src/data includes it.
#pragma once

#include "trellis/data/hdf5.hpp"
#include "trellis/data/read_plan.hpp"
#include "trellis/data/sample_dataset.hpp"

namespace trellis {

struct Shard {
  std::string path;
  H5File file;  // declared before the datasets so that it is closed after them
  H5Dataset samples, labels;
  H5Space samples_space, labels_space;  // file dataspaces, re-selected by every read
  std::int64_t rows = 0;
};

struct SampleDataset::Impl {
  std::vector<Shard> shards;
  std::vector<std::int64_t> shard_begin;  // [S+1] global index of each shard's row 0, then N

  Shape sample_shape;
  std::int64_t sample_numel = 0;
  SampleDType dtype = SampleDType::u8;
  int num_classes = 0;
  Normalization normalization;
  std::string source;

  // x = raw * channel_scale[c] + channel_shift[c] for the channel_size elements of channel c.
  std::vector<float> channel_scale, channel_shift;  // [C]
  std::int64_t channel_size = 0;                    // sample_numel / C
  void prepare_normalization();

  Hdf5Tuning tuning;
  H5Plist transfer;  // H5Dread transfer list (independent or collective)

  // Scratch reused by read(): grows to the largest batch seen, never shrinks.
  ReadPlan plan;
  std::vector<std::uint8_t> raw_u8;      // [unique rows, sample_numel] when dtype is u8
  std::vector<float> raw_f32;            // [unique rows, sample_numel] when dtype is f32
  std::vector<std::int32_t> raw_labels;  // [unique rows]

  // After cache_in_memory(): the whole dataset in file order (raw, not normalised), and
  // read() gathers from here instead of calling HDF5.
  bool cached = false;
  std::vector<std::uint8_t> cache_u8;      // [N, sample_numel] when dtype is u8
  std::vector<float> cache_f32;            // [N, sample_numel] when dtype is f32
  std::vector<std::int32_t> cache_labels;  // [N]

  // Reads the plan's rows of one shard into their slots (one H5Dread per run, or one for
  // all runs; see Hdf5Tuning::one_read_per_shard).
  void read_shard(std::size_t shard);
  // One H5Dread each for /samples and /labels over runs[0..run_count) into slots
  // [slot, slot + rows).
  void read_rows(std::size_t shard, const RowRun* runs, std::size_t run_count, std::int64_t slot,
                 std::int64_t rows);
  void check_label(std::int64_t global_index, std::int32_t label) const;
};

}  // namespace trellis
