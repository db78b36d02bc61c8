#include "trellis/train/files/weights_file.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/durable_file.hpp"
#include "trellis/core/error.hpp"
#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/data/tokenizer_blob.hpp"
#include "trellis/train/files/tensor_file.hpp"

#include <cstdio>
#include <vector>

namespace trellis {

H5File open_weights_file(const std::string& path) {
  hdf5_quiet();
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw InputError(path + ": cannot open weights file: " + hdf5_error_detail());
  H5File file(id);
  try {
    check_file_format(file.get(), kWeightsFormat, kWeightsFormatVersion,
                      "is this a trellis weights file?");
  } catch (const Error& e) {
    throw InputError(path + ": " + e.what());
  }
  return file;
}

void write_weights_root(hid_t file, const std::string& config_ini,
                        const std::string& tokenizer_json) {
  write_string_attribute(file, "format", kWeightsFormat);
  write_int_attribute(file, "format_version", kWeightsFormatVersion);
  write_string_attribute(file, "config", config_ini);
  write_tokenizer_json(file, tokenizer_json);
}

void write_weights_file(const std::string& path, const std::vector<TensorPiece>& pieces,
                        const std::string& config_ini, MPI_Comm comm, const Hdf5Tuning& tuning,
                        const std::string& tokenizer_json) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  const std::string tmp = path + ".tmp";
  PhaseFailure failure;
  try {
    write_tensor_file(
        tmp, pieces, [&](hid_t file) { write_weights_root(file, config_ini, tokenizer_json); },
        {"params", "buffers"}, comm, tuning);
    capture(failure, PhaseFailure::kWhole, path + ": ", false, [&] {
      if (rank == 0) publish_by_rename(tmp, path);
    });
    agree(comm, failure);
  } catch (...) {
    if (rank == 0) std::remove(tmp.c_str());  // best effort
    throw;
  }
}

void read_weights_pieces(const std::string& path, const std::vector<TensorPiece>& pieces,
                         MPI_Comm comm, const Hdf5Tuning& tuning) {
  read_tensor_file(
      path, pieces,
      [](hid_t file) {
        check_file_format(file, kWeightsFormat, kWeightsFormatVersion,
                          "is this a trellis weights file?");
      },
      comm, tuning);
}

std::string read_weights_config(const std::string& path) {
  H5File file = open_weights_file(path);
  if (!has_attribute(file.get(), "config"))
    throw InputError(path + ": missing attribute 'config' (the resolved configuration)");
  return read_string_attribute(file.get(), "config");
}

namespace {

H5Dataset open_dataset(hid_t file, const std::string& path, const std::string& dataset_name) {
  if (H5Lexists(file, dataset_name.substr(0, dataset_name.find('/')).c_str(), H5P_DEFAULT) <= 0 ||
      H5Lexists(file, dataset_name.c_str(), H5P_DEFAULT) <= 0)
    throw InputError(path + ": missing dataset '/" + dataset_name +
                     "' (weights of another model?)");
  return H5Dataset(TRELLIS_H5(H5Dopen2(file, dataset_name.c_str(), H5P_DEFAULT)));
}

Shape dataset_shape(const H5Dataset& dataset) {
  H5Space space(TRELLIS_H5(H5Dget_space(dataset.get())));
  const int rank = TRELLIS_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  TRELLIS_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return Shape(dims.begin(), dims.end());
}

// Reads /<dataset> of the expected shape into `target` (device or host), or throws InputError.
template <class View>
void read_float_dataset(hid_t file, const std::string& path, const std::string& dataset_name,
                        const Shape& expected, const View& target) {
  H5Dataset dataset = open_dataset(file, path, dataset_name);
  const Shape found = dataset_shape(dataset);
  if (found != expected)
    throw InputError(path + ": dataset '/" + dataset_name + "': expected shape " +
                     shape_string(expected) + ", found " + shape_string(found));
  auto host = Kokkos::create_mirror_view(HostSpace(), target);
  TRELLIS_H5(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host.data()));
  Kokkos::deep_copy(target, host);
}

}  // namespace

Shape read_weights_shape(const std::string& path, const std::string& name) {
  H5File file = open_weights_file(path);
  return dataset_shape(open_dataset(file.get(), path, name));
}

void load_weights(const std::string& path, nn::ParameterStore& store,
                  const std::vector<nn::NamedBuffer>& buffers, const std::set<std::string>& skip) {
  H5File file = open_weights_file(path);
  for (std::size_t i = 0; i < store.size(); ++i)
    if (skip.count(store.info(i).name) == 0)
      read_float_dataset(file.get(), path, "params/" + store.info(i).name, store.info(i).shape,
                         store.param(i));
  for (const auto& buffer : buffers)
    read_float_dataset(file.get(), path, "buffers/" + buffer.name,
                       Shape{static_cast<std::int64_t>(buffer.data.extent(0))}, buffer.data);
}

}  // namespace trellis
