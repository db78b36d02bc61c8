// write_checkpoint / read_checkpoint_info / verify_checkpoint / read_checkpoint: the
// checkpoint's root attributes and the steps around the tensor file (tensor_file_*.cpp) and
// the directory (checkpoint_dir.cpp).
#include "trellis/train/files/checkpoint_file.hpp"

#include "checkpoint_impl.hpp"
#include "tensor_file_impl.hpp"
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/durable_file.hpp"
#include "trellis/core/error.hpp"
#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_attributes.hpp"

#include <cstdio>
#include <filesystem>

namespace trellis {

namespace {

namespace fs = std::filesystem;

constexpr const char* kInfoChecksum = "info_checksum";
constexpr const char* kReservedAttributes[] = {"format", "format_version", "step",
                                               "config", "build",          kInfoChecksum};

bool reserved_attribute(const std::string& name) {
  for (const char* r : kReservedAttributes)
    if (name == r) return true;
  return false;
}

void write_scalar_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type,
                            const void* value) {
  H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  H5Attribute attribute(
      TRELLIS_H5(H5Acreate2(object, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  TRELLIS_H5(H5Awrite(attribute.get(), memory_type, value));
}

void write_info_attributes(hid_t file, const CheckpointInfo& info) {
  write_string_attribute(file, "format", kCheckpointFormat);
  write_int_attribute(file, "format_version", kCheckpointFormatVersion);
  write_scalar_attribute(file, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, &info.step);
  write_string_attribute(file, "config", info.config_ini);
  write_string_attribute(file, "build", info.build_info);
  for (const auto& [name, value] : info.counters)
    write_scalar_attribute(file, name.c_str(), H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
  const std::uint64_t checksum = checkpoint_info_checksum(info);
  write_scalar_attribute(file, kInfoChecksum, H5T_STD_U64LE, H5T_NATIVE_UINT64, &checksum);
}

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

std::uint64_t read_u64_attribute(hid_t object, const char* name) {
  if (!has_attribute(object, name))
    throw InputError(std::string("attribute '") + name + "' is missing");
  H5Attribute attribute(TRELLIS_H5(H5Aopen(object, name, H5P_DEFAULT)));
  H5Type type(TRELLIS_H5(H5Aget_type(attribute.get())));
  H5Space space(TRELLIS_H5(H5Aget_space(attribute.get())));
  if (H5Tget_class(type.get()) != H5T_INTEGER ||
      TRELLIS_H5(H5Sget_simple_extent_npoints(space.get())) != 1)
    throw InputError(std::string("attribute '") + name + "': expected one uint64, found " +
                     hdf5_type_name(type.get()));
  std::uint64_t value = 0;
  TRELLIS_H5(H5Aread(attribute.get(), H5T_NATIVE_UINT64, &value));
  return value;
}

// The root attributes of an open checkpoint, checked (throws InputError without the file
// name).
CheckpointInfo read_info(hid_t file) {
  const std::int64_t version = check_file_format(file, kCheckpointFormat, kCheckpointFormatVersion,
                                                 "not a trellis checkpoint");
  CheckpointInfo info;
  info.step = read_int_attribute(file, "step");
  info.config_ini = read_string_attribute(file, "config");
  info.build_info = read_string_attribute(file, "build");
  std::vector<std::string> names;
  hsize_t index = 0;
  TRELLIS_H5(H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute, &names));
  for (const std::string& name : names) {
    if (reserved_attribute(name)) continue;
    H5Attribute attribute(TRELLIS_H5(H5Aopen(file, name.c_str(), H5P_DEFAULT)));
    H5Type type(TRELLIS_H5(H5Aget_type(attribute.get())));
    if (H5Tget_class(type.get()) != H5T_INTEGER) continue;  // not a counter: skipped
    info.counters[name] = read_int_attribute(file, name.c_str());
  }
  if (version >= 2) {  // version 1 files have no info_checksum
    const std::uint64_t stored = read_u64_attribute(file, kInfoChecksum);
    const std::uint64_t computed = checkpoint_info_checksum(info);
    if (stored != computed) {
      char text[96];
      std::snprintf(text, sizeof text, "stored 0x%016llx, computed 0x%016llx",
                    static_cast<unsigned long long>(stored),
                    static_cast<unsigned long long>(computed));
      throw InputError(std::string("attribute '") + kInfoChecksum + "' mismatch (" + text +
                       "): the step, config, build or a counter attribute is corrupt");
    }
  }
  return info;
}

void check_root(hid_t file) { read_info(file); }

std::string state_file(const std::string& dir) {
  return strip_trailing_slashes(dir) + "/" + kCheckpointFileName;
}

}  // namespace

std::uint64_t checkpoint_info_checksum(const CheckpointInfo& info) {
  tensor_file::LayoutHash hash;
  auto integer = [&](const char* name, std::int64_t value) {
    hash.text(name);
    hash.integer(value);
  };
  auto text = [&](const char* name, const std::string& value) {
    hash.text(name);
    hash.text(value);
  };
  integer("step", info.step);
  text("config", info.config_ini);
  text("build", info.build_info);
  for (const auto& [name, value] : info.counters) integer(name.c_str(), value);
  return hash.value;
}

std::string write_checkpoint(const std::string& root_path, const std::vector<TensorPiece>& pieces,
                             const CheckpointInfo& info, int keep, MPI_Comm comm,
                             const Hdf5Tuning& tuning, const TensorWriteHook& after_write) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  const std::string root = strip_trailing_slashes(root_path);
  std::string name, final_dir, tmp_dir;
  tensor_file::LayoutHash layout;  // of what every rank must pass alike
  PhaseFailure failure;

  // 1. Local checks.
  capture(failure, PhaseFailure::kWhole, "write_checkpoint: ", false, [&] {
    name = checkpoint_dir_name(info.step);
    final_dir = root + "/" + name;
    tmp_dir = final_dir + ".tmp";
    for (const auto& [counter, value] : info.counters)
      if (counter.empty() || reserved_attribute(counter))
        throw Error("counter name '" + counter + "' is empty or reserved");
    layout.text(root);
    layout.integer(info.step);
    layout.integer(keep);
    layout.integer(static_cast<std::int64_t>(checkpoint_info_checksum(info)));
    tensor_file::check_pieces(pieces, true);
  });
  agree(comm, failure);
  if (!tensor_file::same_on_all_ranks(comm, layout.value))
    throw Error("write_checkpoint: the ranks passed different roots, steps, keep counts or infos");

  // 2. Rank 0 makes <root>/step-NNNNNNN.tmp (empty).
  capture(failure, PhaseFailure::kWhole, "write_checkpoint: ", false, [&] {
    if (rank != 0) return;
    std::error_code ec;
    const bool created = fs::create_directories(root, ec);
    if (ec) throw Error("cannot create '" + root + "': " + ec.message());
    if (created) fsync_directory(parent_directory(root));
    remove_tree(tmp_dir);
    if (!fs::create_directory(tmp_dir, ec) || ec)
      throw Error("cannot create '" + tmp_dir + "': " + (ec ? ec.message() : "exists"));
  });
  agree(comm, failure);

  // 3. Every rank writes state.h5 (collective); on any failure the .tmp directory goes.
  try {
    write_tensor_file(
        tmp_dir + "/" + kCheckpointFileName, pieces,
        [&](hid_t file) { write_info_attributes(file, info); }, {}, comm, tuning, after_write);
  } catch (...) {
    std::error_code ec;
    if (rank == 0) fs::remove_all(tmp_dir, ec);  // best effort; "*.tmp" is ignored anyway
    throw;
  }

  // 4. Rank 0 syncs, renames, updates `latest`, prunes.
  capture(failure, PhaseFailure::kWhole, "write_checkpoint: ", false, [&] {
    if (rank == 0) publish_checkpoint(root, name, keep);
  });
  agree(comm, failure);
  return final_dir;
}

CheckpointInfo read_checkpoint_info(const std::string& dir) {
  hdf5_quiet();
  const std::string path = state_file(dir);
  try {
    const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0)
      throw InputError("cannot open the checkpoint file (missing, truncated or not HDF5): " +
                       hdf5_error_detail());
    H5File file(id);
    return read_info(file.get());
  } catch (const Error& e) {
    throw InputError(path + ": " + e.what());
  }
}

void verify_checkpoint(const std::string& dir, MPI_Comm comm, const Hdf5Tuning& tuning) {
  verify_tensor_file(state_file(dir), check_root, comm, tuning);
}

void read_checkpoint(const std::string& dir, const std::vector<TensorPiece>& pieces, MPI_Comm comm,
                     const Hdf5Tuning& tuning) {
  read_tensor_file(state_file(dir), pieces, check_root, comm, tuning);
}

}  // namespace trellis
