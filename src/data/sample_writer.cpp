#include "trellis/data/sample_writer.hpp"

#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/data/shard_paths.hpp"

#include <algorithm>

namespace trellis {

namespace {

void check_spec(const SampleFileSpec& spec, const std::int32_t* labels, std::int64_t n) {
  TRELLIS_REQUIRE(!spec.sample_shape.empty(), "a sample needs at least one dimension");
  for (std::int64_t d : spec.sample_shape) TRELLIS_REQUIRE(d > 0, shape_string(spec.sample_shape));
  TRELLIS_REQUIRE(spec.num_classes > 0, "num_classes must be positive");
  const auto channels = static_cast<std::size_t>(spec.sample_shape[0]);
  const Normalization& norm = spec.normalization;
  TRELLIS_REQUIRE(norm.mean.size() == 1 || norm.mean.size() == channels, "mean: [1] or [C]");
  TRELLIS_REQUIRE(norm.std.size() == 1 || norm.std.size() == channels, "std: [1] or [C]");
  TRELLIS_REQUIRE(n >= 0, "row count");
  for (std::int64_t i = 0; i < n; ++i) {
    TRELLIS_REQUIRE(labels[i] >= 0 && labels[i] < spec.num_classes,
                    "label " + std::to_string(labels[i]) + " of row " + std::to_string(i));
  }
}

// Chunked dataset [n, dims...] of `file_type` holding `data` (native `memory_type`).
void write_rows(hid_t file, const char* name, hid_t file_type, hid_t memory_type,
                const Shape& row_shape, const void* data, std::int64_t n, std::int64_t chunk_rows) {
  std::vector<hsize_t> dims{static_cast<hsize_t>(n)};
  for (std::int64_t d : row_shape) dims.push_back(static_cast<hsize_t>(d));
  std::vector<hsize_t> chunk = dims;
  // A chunk needs every extent >= 1, even for an empty shard.
  chunk[0] = static_cast<hsize_t>(std::max<std::int64_t>(1, std::min(chunk_rows, n)));

  const int rank = static_cast<int>(dims.size());
  H5Space space(TRELLIS_H5(H5Screate_simple(rank, dims.data(), nullptr)));
  H5Plist create(TRELLIS_H5(H5Pcreate(H5P_DATASET_CREATE)));
  TRELLIS_H5(H5Pset_chunk(create.get(), rank, chunk.data()));
  H5Dataset dataset(TRELLIS_H5(
      H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT)));
  if (n > 0) {
    TRELLIS_H5(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  }
}

}  // namespace

void write_sample_file(const std::string& path, const SampleFileSpec& spec, const void* samples,
                       const std::int32_t* labels, std::int64_t n, const Hdf5Tuning& tuning) {
  hdf5_quiet();
  check_spec(spec, labels, n);
  H5Plist access = make_serial_file_access(tuning);
  H5File file(TRELLIS_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get())));

  const bool u8 = spec.dtype == SampleDType::u8;
  write_rows(file.get(), "samples", u8 ? H5T_STD_U8LE : H5T_IEEE_F32LE,
             u8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT, spec.sample_shape, samples, n,
             tuning.chunk_rows);
  write_rows(file.get(), "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, Shape{}, labels, n,
             tuning.chunk_rows);

  // Attributes on the root group (a file id stands for its root group).
  write_string_attribute(file.get(), "format", kSampleFormat);
  write_int_attribute(file.get(), "format_version", kSampleFormatVersion);
  write_int_attribute(file.get(), "num_classes", spec.num_classes);
  write_float_attribute(file.get(), "scale", {spec.normalization.scale}, /*scalar=*/true);
  write_float_attribute(file.get(), "mean", spec.normalization.mean);
  write_float_attribute(file.get(), "std", spec.normalization.std);
  if (!spec.source.empty()) write_string_attribute(file.get(), "source", spec.source);
}

std::vector<std::string> write_sample_shards(const std::string& stem, int shards,
                                             const SampleFileSpec& spec, const void* samples,
                                             const std::int32_t* labels, std::int64_t n,
                                             const Hdf5Tuning& tuning) {
  TRELLIS_REQUIRE(shards >= 1, "shard count");
  const std::int64_t row_bytes =
      shape_numel(spec.sample_shape) * (spec.dtype == SampleDType::u8 ? 1 : 4);
  const auto* bytes = static_cast<const unsigned char*>(samples);
  std::vector<std::string> paths;
  for (int i = 0; i < shards; ++i) {
    const std::int64_t begin = i * n / shards, end = (i + 1) * n / shards;
    paths.push_back(shard_file_name(stem, i, shards));
    write_sample_file(paths.back(), spec, bytes + begin * row_bytes, labels + begin, end - begin,
                      tuning);
  }
  return paths;
}

}  // namespace trellis
