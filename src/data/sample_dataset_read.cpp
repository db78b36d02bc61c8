// SampleDataset::read: sorted hyperslab reads per shard, then scatter + normalise.
#include "sample_dataset_impl.hpp"

#include <algorithm>

namespace trellis {

namespace {

// Selects the plan's runs of one shard in a file dataspace of rank `rank`: each run is one
// hyperslab block [first_row, first_row + rows) x (whole sample). No runs: empty selection,
// which a collective read still needs.
void select_runs(hid_t space, int rank, const RowRun* runs, std::size_t count) {
  if (count == 0) {
    TRELLIS_H5(H5Sselect_none(space));
    return;
  }
  hsize_t start[H5S_MAX_RANK] = {}, block[H5S_MAX_RANK], ones[H5S_MAX_RANK];
  TRELLIS_H5(H5Sget_simple_extent_dims(space, block, nullptr));
  std::fill(ones, ones + rank, hsize_t{1});
  for (std::size_t r = 0; r < count; ++r) {
    start[0] = static_cast<hsize_t>(runs[r].first_row);
    block[0] = static_cast<hsize_t>(runs[r].rows);
    TRELLIS_H5(H5Sselect_hyperslab(space, r == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start, nullptr,
                                   ones, block));
  }
}

// Memory dataspace [rows, rest of file_dims...] holding the selected rows back to back.
H5Space memory_space(hid_t file_space, int rank, std::int64_t rows) {
  hsize_t dims[H5S_MAX_RANK];
  TRELLIS_H5(H5Sget_simple_extent_dims(file_space, dims, nullptr));
  dims[0] = static_cast<hsize_t>(std::max<std::int64_t>(rows, 1));
  H5Space space(TRELLIS_H5(H5Screate_simple(rank, dims, nullptr)));
  if (rows == 0) TRELLIS_H5(H5Sselect_none(space.get()));
  return space;
}

template <class Raw>
void normalise_sample(const Raw* raw, float* out, std::size_t channels, std::int64_t channel_size,
                      const float* scale, const float* shift) {
  for (std::size_t c = 0; c < channels; ++c) {
    const float a = scale[c], b = shift[c];
    for (std::int64_t k = 0; k < channel_size; ++k) out[k] = static_cast<float>(raw[k]) * a + b;
    raw += channel_size;
    out += channel_size;
  }
}

}  // namespace

void SampleDataset::Impl::read_rows(std::size_t s, const RowRun* runs, std::size_t run_count,
                                    std::int64_t slot, std::int64_t rows) {
  Shard& shard = shards[s];
  const int sample_rank = static_cast<int>(sample_shape.size()) + 1;
  const std::size_t offset = static_cast<std::size_t>(slot * sample_numel);
  const bool u8 = dtype == SampleDType::u8;

  select_runs(shard.samples_space.get(), sample_rank, runs, run_count);
  select_runs(shard.labels_space.get(), 1, runs, run_count);
  H5Space sample_memory = memory_space(shard.samples_space.get(), sample_rank, rows);
  H5Space label_memory = memory_space(shard.labels_space.get(), 1, rows);

  TRELLIS_H5(H5Dread(shard.samples.get(), u8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT,
                     sample_memory.get(), shard.samples_space.get(), transfer.get(),
                     u8 ? static_cast<void*>(raw_u8.data() + offset)
                        : static_cast<void*>(raw_f32.data() + offset)));
  // uint8 labels are widened to int32 by HDF5's type conversion.
  TRELLIS_H5(H5Dread(shard.labels.get(), H5T_NATIVE_INT32, label_memory.get(),
                     shard.labels_space.get(), transfer.get(), raw_labels.data() + slot));
}

void SampleDataset::Impl::read_shard(std::size_t s) {
  const RowRun* runs = plan.runs().data() + plan.run_begin(s);
  const std::size_t run_count = plan.run_begin(s + 1) - plan.run_begin(s);
  std::int64_t slot = plan.slot_begin(s);
  if (tuning.collective_transfer || tuning.one_read_per_shard) {
    read_rows(s, runs, run_count, slot, plan.slot_begin(s + 1) - slot);
    return;
  }
  for (std::size_t r = 0; r < run_count; ++r) {
    read_rows(s, runs + r, 1, slot, runs[r].rows);
    slot += runs[r].rows;
  }
}

void SampleDataset::Impl::check_label(std::int64_t global_index, std::int32_t label) const {
  if (label >= 0 && label < num_classes) return;
  const auto s = static_cast<std::size_t>(
      std::upper_bound(shard_begin.begin(), shard_begin.end(), global_index) - shard_begin.begin() -
      1);
  throw InputError(shards[s].path + ": dataset '/labels': row " +
                   std::to_string(global_index - shard_begin[s]) + " (global index " +
                   std::to_string(global_index) + ") has label " + std::to_string(label) +
                   ", expected a value in [0, num_classes = " + std::to_string(num_classes) + ")");
}

void SampleDataset::cache_in_memory() {
  Impl& d = *impl_;
  if (d.cached) return;
  const auto n = static_cast<std::size_t>(d.shard_begin.back());
  const auto numel = static_cast<std::size_t>(d.sample_numel);
  const bool u8 = d.dtype == SampleDType::u8;
  // read_rows() fills the raw_* scratch at a slot: size it for all rows, read each shard as
  // one run into its global position, then keep the buffers as the cache.
  d.raw_labels.assign(std::max<std::size_t>(n, 1), 0);
  if (u8)
    d.raw_u8.assign(std::max<std::size_t>(n, 1) * numel, 0);
  else
    d.raw_f32.assign(std::max<std::size_t>(n, 1) * numel, 0.0f);
  for (std::size_t s = 0; s < d.shards.size(); ++s) {
    const RowRun whole{0, d.shards[s].rows};
    if (whole.rows > 0 || d.tuning.collective_transfer)
      d.read_rows(s, &whole, whole.rows > 0 ? 1 : 0, d.shard_begin[s], whole.rows);
  }
  d.cache_labels = std::move(d.raw_labels);
  d.cache_u8 = std::move(d.raw_u8);
  d.cache_f32 = std::move(d.raw_f32);
  d.raw_labels.clear();
  d.raw_u8.clear();
  d.raw_f32.clear();
  d.cached = true;
}

bool SampleDataset::cached() const { return impl_->cached; }

void SampleDataset::read(const std::vector<std::int64_t>& global_indices, float* out,
                         std::int32_t* labels_out) {
  Impl& d = *impl_;
  if (d.cached) {
    const auto numel = static_cast<std::size_t>(d.sample_numel);
    const std::size_t channels = d.channel_scale.size();
    const std::int64_t n = d.shard_begin.back();
    for (std::size_t p = 0; p < global_indices.size(); ++p) {
      const std::int64_t index = global_indices[p];
      if (index < 0 || index >= n)
        throw Error("SampleDataset::read: index " + std::to_string(index) + " outside [0, " +
                    std::to_string(n) + ")");
      const auto row = static_cast<std::size_t>(index);
      d.check_label(index, d.cache_labels[row]);
      labels_out[p] = d.cache_labels[row];
      if (d.dtype == SampleDType::u8)
        normalise_sample(d.cache_u8.data() + row * numel, out + p * numel, channels, d.channel_size,
                         d.channel_scale.data(), d.channel_shift.data());
      else
        normalise_sample(d.cache_f32.data() + row * numel, out + p * numel, channels,
                         d.channel_size, d.channel_scale.data(), d.channel_shift.data());
    }
    return;
  }
  d.plan.build(global_indices, d.shard_begin);

  // Grow-only scratch; at least one row so that pointers are valid for empty selections.
  const std::size_t rows =
      static_cast<std::size_t>(std::max<std::int64_t>(d.plan.unique_rows(), 1));
  const auto numel = static_cast<std::size_t>(d.sample_numel);
  const bool u8 = d.dtype == SampleDType::u8;
  if (d.raw_labels.size() < rows) d.raw_labels.resize(rows);
  if (u8 && d.raw_u8.size() < rows * numel) d.raw_u8.resize(rows * numel);
  if (!u8 && d.raw_f32.size() < rows * numel) d.raw_f32.resize(rows * numel);

  // Collective transfer: every rank reads every shard (empty selections where it has no
  // rows), so all ranks make the same H5Dread calls in the same order.
  for (std::size_t s = 0; s < d.shards.size(); ++s) {
    const bool touched = d.plan.run_begin(s + 1) > d.plan.run_begin(s);
    if (touched || d.tuning.collective_transfer) d.read_shard(s);
  }

  // Labels are checked only after all reads, so a bad label never leaves other ranks
  // waiting inside a collective H5Dread.
  const std::vector<std::int64_t>& slot_of = d.plan.slot_of();
  const std::size_t channels = d.channel_scale.size();
  for (std::size_t p = 0; p < global_indices.size(); ++p) {
    const auto slot = static_cast<std::size_t>(slot_of[p]);
    d.check_label(global_indices[p], d.raw_labels[slot]);
    labels_out[p] = d.raw_labels[slot];
    float* sample_out = out + p * numel;
    if (u8) {
      normalise_sample(d.raw_u8.data() + slot * numel, sample_out, channels, d.channel_size,
                       d.channel_scale.data(), d.channel_shift.data());
    } else {
      normalise_sample(d.raw_f32.data() + slot * numel, sample_out, channels, d.channel_size,
                       d.channel_scale.data(), d.channel_shift.data());
    }
  }
}

}  // namespace trellis
