// Test-only helpers for the data layer: scratch directories, synthetic sample files whose
// every value is a known function of (global index, element), and in-place file surgery to
// produce the invalid files the validation tests need. Used by tests/unit and tests/mpi.
#pragma once

#include "trellis/data/hdf5.hpp"
#include "trellis/data/sample_writer.hpp"
#include "trellis/data/shard_paths.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace trellis::testing {

// A fresh, empty directory under $TRELLIS_TEST_DATA (set by ctest) or /tmp.
inline std::string fresh_test_dir(const std::string& name) {
  const char* root = std::getenv("TRELLIS_TEST_DATA");
  const std::filesystem::path dir =
      std::filesystem::path(root != nullptr && *root != '\0' ? root : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Raw values of the synthetic datasets: element e of global sample i.
inline std::uint8_t raw_u8(std::int64_t i, std::int64_t e) {
  return static_cast<std::uint8_t>((i * 7 + e * 3) % 251);
}
inline float raw_f32(std::int64_t i, std::int64_t e) {
  return static_cast<float>(i) - 0.25f * static_cast<float>(e);
}
inline std::int32_t label_of(std::int64_t i, int num_classes) {
  return static_cast<std::int32_t>((i * 5 + 1) % num_classes);
}

// The normalised value the reader must hand out (in double, compared with a tolerance).
inline double expected_value(const SampleFileSpec& spec, std::int64_t i, std::int64_t e) {
  const Normalization& n = spec.normalization;
  const std::int64_t channel_size = shape_numel(spec.sample_shape) / spec.sample_shape[0];
  const auto c = static_cast<std::size_t>(e / channel_size);
  const double mean = n.mean.size() == 1 ? n.mean[0] : n.mean[c];
  const double std = n.std.size() == 1 ? n.std[0] : n.std[c];
  const double raw = spec.dtype == SampleDType::u8 ? raw_u8(i, e) : raw_f32(i, e);
  return (raw * static_cast<double>(n.scale) - mean) / std;
}

// Writes rows [first, first + n) of the synthetic dataset to `path`.
inline void write_synthetic(const std::string& path, const SampleFileSpec& spec, std::int64_t first,
                            std::int64_t n) {
  const std::int64_t numel = shape_numel(spec.sample_shape);
  std::vector<std::uint8_t> u8(static_cast<std::size_t>(n * numel));
  std::vector<float> f32(u8.size());
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) {
    labels[static_cast<std::size_t>(r)] = label_of(first + r, spec.num_classes);
    for (std::int64_t e = 0; e < numel; ++e) {
      u8[static_cast<std::size_t>(r * numel + e)] = raw_u8(first + r, e);
      f32[static_cast<std::size_t>(r * numel + e)] = raw_f32(first + r, e);
    }
  }
  const void* samples = spec.dtype == SampleDType::u8 ? static_cast<const void*>(u8.data())
                                                      : static_cast<const void*>(f32.data());
  Hdf5Tuning tuning;
  tuning.chunk_rows = 4;  // small chunks, so reads cross chunk boundaries too
  write_sample_file(path, spec, samples, labels.data(), n, tuning);
}

// Writes the synthetic dataset as shards <stem>-i-of-K.h5 with the given row counts (zero
// allowed) and returns the glob that opens them.
inline std::string write_synthetic_shards(const std::string& stem, const SampleFileSpec& spec,
                                          const std::vector<std::int64_t>& rows) {
  std::int64_t first = 0;
  const int k = static_cast<int>(rows.size());
  for (int i = 0; i < k; ++i) {
    write_synthetic(shard_file_name(stem, i, k), spec, first, rows[static_cast<std::size_t>(i)]);
    first += rows[static_cast<std::size_t>(i)];
  }
  return stem + "-*.h5";
}

inline SampleFileSpec image_spec() {
  SampleFileSpec spec;
  spec.sample_shape = {2, 3, 2};  // C = 2 channels of 3x2
  spec.dtype = SampleDType::u8;
  spec.num_classes = 7;
  spec.normalization.scale = 1.0f / 255.0f;
  spec.normalization.mean = {0.1f, 0.2f};
  spec.normalization.std = {0.5f, 2.0f};
  spec.source = "synthetic";
  return spec;
}

// Opens an existing file read-write with the serial driver and hands its id to `edit`.
inline void edit_file(const std::string& path, const std::function<void(hid_t)>& edit) {
  hdf5_quiet();
  H5File file(TRELLIS_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
  edit(file.get());
}

// Replaces dataset /name with one of `type` and shape dims (contents: zeros).
inline void replace_dataset(hid_t file, const char* name, hid_t type,
                            const std::vector<hsize_t>& dims) {
  TRELLIS_H5(H5Ldelete(file, name, H5P_DEFAULT));
  H5Space space(TRELLIS_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5Dataset dataset(
      TRELLIS_H5(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

}  // namespace trellis::testing
