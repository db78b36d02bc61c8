// SampleDataset: opening and validation. read() lives in sample_dataset_read.cpp.
#include "sample_dataset_impl.hpp"

#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/data/shard_paths.hpp"

#include <cmath>
#include <sstream>

namespace trellis {

namespace {

std::string values_string(const std::vector<float>& values) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

// What one file declares; the first shard's is the dataset's, the others must equal it.
struct ShardInfo {
  Shape sample_shape;
  SampleDType dtype = SampleDType::u8;
  int num_classes = 0;
  Normalization normalization;
  std::string source;
};

constexpr const char* kConverters =
    "tools/to_samples.py converts image folders, NumPy arrays and CSV, tools/idx_to_hdf5.py "
    "MNIST idx files";

// Every required attribute and dataset that is missing, named at once: a file written by hand
// would otherwise take one attempt per omission. (A file of another format is left to
// check_file_format, which names the format.)
void require_present(hid_t file) {
  if (has_attribute(file, "format") && read_string_attribute(file, "format") != kSampleFormat)
    return;
  std::vector<std::string> missing;
  for (const char* name : {"format", "format_version", "num_classes", "scale", "mean", "std"})
    if (!has_attribute(file, name)) missing.push_back(std::string("attribute '") + name + "'");
  for (const char* name : {"samples", "labels"})
    if (TRELLIS_H5(H5Lexists(file, name, H5P_DEFAULT)) <= 0)
      missing.push_back(std::string("dataset '/") + name + "'");
  if (missing.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < missing.size(); ++i)
    list += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
  throw InputError(list + (missing.size() == 1 ? " is" : " are") +
                   " missing (a trellis.samples file has datasets /samples [N, ...] uint8 or "
                   "float32 and /labels [N] int32, and attributes format = \"trellis.samples\", "
                   "format_version = 1, num_classes, scale, mean and std: docs/data-formats.md; " +
                   kConverters + ")");
}

void check_format_attributes(hid_t file, ShardInfo& info) {
  require_present(file);
  check_file_format(file, kSampleFormat, kSampleFormatVersion,
                    std::string("convert data with ") + kConverters);
  const std::int64_t classes = read_int_attribute(file, "num_classes");
  if (classes <= 0 || classes > (std::int64_t{1} << 30)) {
    throw InputError("attribute 'num_classes': expected a positive integer, found " +
                     std::to_string(classes));
  }
  info.num_classes = static_cast<int>(classes);
  if (has_attribute(file, "source")) info.source = read_string_attribute(file, "source");
}

std::vector<float> finite_floats(hid_t file, const char* name, bool positive) {
  std::vector<float> values;
  for (double v : read_float_attribute(file, name)) {
    if (!std::isfinite(v) || (positive && v <= 0)) {
      throw InputError(std::string("attribute '") + name + "': expected " +
                       (positive ? "positive " : "") + "finite values, found " + std::to_string(v));
    }
    values.push_back(static_cast<float>(v));
  }
  return values;
}

void check_normalization(hid_t file, ShardInfo& info) {
  Normalization& norm = info.normalization;
  const std::vector<float> scale = finite_floats(file, "scale", false);
  if (scale.size() != 1 || scale[0] == 0.0f) {
    throw InputError("attribute 'scale': expected one non-zero number, found " +
                     values_string(scale));
  }
  norm.scale = scale[0];
  norm.mean = finite_floats(file, "mean", false);
  norm.std = finite_floats(file, "std", true);
  const auto channels = static_cast<std::size_t>(info.sample_shape[0]);
  using Named = std::pair<const char*, const std::vector<float>*>;
  for (const auto& [name, values] : {Named{"mean", &norm.mean}, Named{"std", &norm.std}}) {
    if (values->size() != 1 && values->size() != channels) {
      throw InputError(std::string("attribute '") + name + "': expected 1 or " +
                       std::to_string(channels) + " (channels) values, found " +
                       std::to_string(values->size()));
    }
  }
}

// Opens /name and returns it with its dims; checks it exists and has the expected rank.
H5Dataset open_rows(hid_t file, const char* name, hid_t dapl, std::vector<hsize_t>& dims,
                    bool sample_rows) {
  if (TRELLIS_H5(H5Lexists(file, name, H5P_DEFAULT)) <= 0) {
    throw InputError(std::string("dataset '/") + name + "' is missing");
  }
  H5Dataset dataset(TRELLIS_H5(H5Dopen2(file, name, dapl)));
  H5Space space(TRELLIS_H5(H5Dget_space(dataset.get())));
  const int rank = TRELLIS_H5(H5Sget_simple_extent_ndims(space.get()));
  if (sample_rows ? rank < 2 : rank != 1) {
    throw InputError(std::string("dataset '/") + name + "': expected rank " +
                     (sample_rows ? ">= 2 ([N, ...])" : "1 ([N])") + ", found rank " +
                     std::to_string(rank));
  }
  dims.resize(static_cast<std::size_t>(rank));
  TRELLIS_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return dataset;
}

bool is_type(hid_t type, H5T_class_t kind, std::size_t bytes, bool is_signed) {
  return H5Tget_class(type) == kind && H5Tget_size(type) == bytes &&
         (kind != H5T_INTEGER || (H5Tget_sign(type) == H5T_SGN_2) == is_signed);
}

// Opens one shard and fills `info` from it. Errors name the dataset or attribute; the caller
// adds the file name.
Shard open_shard(const std::string& path, hid_t fapl, hid_t dapl, ShardInfo& info) {
  Shard shard;
  shard.path = path;
  const hid_t file_id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  if (file_id < 0) {
    throw InputError("cannot open as HDF5 (not an HDF5 file, or unreadable): " +
                     hdf5_error_detail());
  }
  shard.file = H5File(file_id);
  const hid_t file = shard.file.get();
  check_format_attributes(file, info);

  std::vector<hsize_t> sample_dims, label_dims;
  shard.samples = open_rows(file, "samples", dapl, sample_dims, true);
  shard.labels = open_rows(file, "labels", dapl, label_dims, false);

  H5Type sample_type(TRELLIS_H5(H5Dget_type(shard.samples.get())));
  if (is_type(sample_type.get(), H5T_INTEGER, 1, false)) {
    info.dtype = SampleDType::u8;
  } else if (is_type(sample_type.get(), H5T_FLOAT, 4, true)) {
    info.dtype = SampleDType::f32;
  } else {
    throw InputError("dataset '/samples': expected uint8 or float32, found " +
                     hdf5_type_name(sample_type.get()));
  }
  H5Type label_type(TRELLIS_H5(H5Dget_type(shard.labels.get())));
  if (!is_type(label_type.get(), H5T_INTEGER, 4, true) &&
      !is_type(label_type.get(), H5T_INTEGER, 1, false)) {
    throw InputError("dataset '/labels': expected int32 or uint8, found " +
                     hdf5_type_name(label_type.get()));
  }
  if (sample_dims[0] != label_dims[0]) {
    throw InputError("dataset '/labels': expected " + std::to_string(sample_dims[0]) +
                     " rows (as /samples), found " + std::to_string(label_dims[0]));
  }
  info.sample_shape.assign(sample_dims.begin() + 1, sample_dims.end());
  for (std::int64_t d : info.sample_shape) {
    if (d == 0) throw InputError("dataset '/samples': a sample has an empty dimension");
  }
  check_normalization(file, info);

  shard.rows = static_cast<std::int64_t>(sample_dims[0]);
  shard.samples_space = H5Space(TRELLIS_H5(H5Dget_space(shard.samples.get())));
  shard.labels_space = H5Space(TRELLIS_H5(H5Dget_space(shard.labels.get())));
  return shard;
}

// Compares a later shard's declaration with the first one's.
void check_same(const ShardInfo& first, const ShardInfo& other, const std::string& first_path) {
  auto differs = [&](const std::string& what, const std::string& found,
                     const std::string& expected) {
    throw InputError(what + " " + found + " differs from " + expected + " in " + first_path +
                     " (all shards of a dataset must agree)");
  };
  if (other.sample_shape != first.sample_shape) {
    differs("sample shape", shape_string(other.sample_shape), shape_string(first.sample_shape));
  }
  if (other.dtype != first.dtype) {
    differs("dataset '/samples' type", sample_dtype_name(other.dtype),
            sample_dtype_name(first.dtype));
  }
  if (other.num_classes != first.num_classes) {
    differs("attribute 'num_classes'", std::to_string(other.num_classes),
            std::to_string(first.num_classes));
  }
  if (other.normalization != first.normalization) {
    const Normalization &a = other.normalization, &b = first.normalization;
    differs("normalisation (scale, mean, std)",
            std::to_string(a.scale) + ", " + values_string(a.mean) + ", " + values_string(a.std),
            std::to_string(b.scale) + ", " + values_string(b.mean) + ", " + values_string(b.std));
  }
}

}  // namespace

SampleDataset SampleDataset::open(const std::string& spec, MPI_Comm comm,
                                  const Hdf5Tuning& tuning) {
  return open(std::vector<std::string>{spec}, comm, tuning);
}

SampleDataset SampleDataset::open(const std::vector<std::string>& specs, MPI_Comm comm,
                                  const Hdf5Tuning& tuning) {
  check_tuning(tuning);
  hdf5_quiet();
  const std::vector<std::string> paths = resolve_data_files(specs, comm);

  auto impl = std::make_unique<Impl>();
  impl->tuning = tuning;
  H5Plist fapl = make_parallel_file_access(comm, tuning);
  H5Plist dapl = make_dataset_access(tuning);
  impl->transfer = make_transfer(tuning);

  ShardInfo first;
  impl->shard_begin.push_back(0);
  for (const std::string& path : paths) {
    ShardInfo info;
    try {
      impl->shards.push_back(open_shard(path, fapl.get(), dapl.get(), info));
      if (impl->shards.size() > 1) check_same(first, info, paths.front());
    } catch (const Error& e) {  // HDF5 failures and format violations alike name the file
      throw InputError(path + ": " + e.what());
    }
    if (impl->shards.size() == 1) first = info;
    impl->shard_begin.push_back(impl->shard_begin.back() + impl->shards.back().rows);
  }
  if (impl->shard_begin.back() == 0) {
    throw InputError(paths.front() + ": the dataset has no samples (/samples has 0 rows)");
  }

  impl->sample_shape = first.sample_shape;
  impl->sample_numel = shape_numel(first.sample_shape);
  impl->dtype = first.dtype;
  impl->num_classes = first.num_classes;
  impl->normalization = first.normalization;
  impl->source = first.source;
  impl->prepare_normalization();
  return SampleDataset(std::move(impl));
}

void SampleDataset::Impl::prepare_normalization() {
  const std::int64_t channels = sample_shape[0];
  channel_size = sample_numel / channels;
  channel_scale.resize(static_cast<std::size_t>(channels));
  channel_shift.resize(static_cast<std::size_t>(channels));
  for (std::int64_t c = 0; c < channels; ++c) {
    const auto i = static_cast<std::size_t>(c);
    const double mean =
        normalization.mean.size() == 1 ? normalization.mean[0] : normalization.mean[i];
    const double std = normalization.std.size() == 1 ? normalization.std[0] : normalization.std[i];
    channel_scale[i] = static_cast<float>(normalization.scale / std);
    channel_shift[i] = static_cast<float>(-mean / std);
  }
}

SampleDataset::SampleDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SampleDataset::SampleDataset(SampleDataset&&) noexcept = default;
SampleDataset& SampleDataset::operator=(SampleDataset&&) noexcept = default;
SampleDataset::~SampleDataset() = default;

std::int64_t SampleDataset::size() const { return impl_->shard_begin.back(); }
const Shape& SampleDataset::sample_shape() const { return impl_->sample_shape; }
std::int64_t SampleDataset::sample_numel() const { return impl_->sample_numel; }
int SampleDataset::num_classes() const { return impl_->num_classes; }
SampleDType SampleDataset::sample_dtype() const { return impl_->dtype; }
const Normalization& SampleDataset::normalization() const { return impl_->normalization; }
const std::string& SampleDataset::source() const { return impl_->source; }
std::size_t SampleDataset::shard_count() const { return impl_->shards.size(); }
const std::string& SampleDataset::shard_path(std::size_t shard) const {
  return impl_->shards.at(shard).path;
}

}  // namespace trellis
