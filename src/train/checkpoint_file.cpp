#include "trellis/train/checkpoint_file.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_attributes.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

namespace trellis {

namespace {

namespace fs = std::filesystem;

using H5Object = H5Handle<H5Oclose>;

constexpr const char* kReservedAttributes[] = {"format", "format_version", "step", "config",
                                               "build"};
constexpr std::size_t kVerifyBlockElements = std::size_t{16} << 20;  // 64 MiB of float32

bool reserved_attribute(const std::string& name) {
  for (const char* r : kReservedAttributes)
    if (name == r) return true;
  return false;
}

// ---- agreement -----------------------------------------------------------------------------

// The first error of a phase on this rank. `order` says where it happened (-1: the file or the
// call as a whole, i: tensor i); over all ranks the lowest order wins (ties: the lowest rank),
// so every rank reports the same error.
struct Failure {
  int order = INT_MAX;
  ExitCode code = ExitCode::failure;
  std::string message;

  void record(int at, ExitCode c, const std::string& m) {
    if (at >= order) return;
    order = at;
    code = c;
    message = m;
  }
};

// Runs fn; an exception becomes `failure` at `order`, its message prefixed. as_input: every
// trellis::Error counts as bad input (exit 3): it came from reading a checkpoint.
template <class F>
void capture(Failure& failure, int order, const std::string& prefix, bool as_input, F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    failure.record(order, as_input ? ExitCode::bad_input : e.code(), prefix + e.what());
  } catch (const std::exception& e) {
    failure.record(order, ExitCode::failure, prefix + e.what());
  }
}

[[noreturn]] void throw_as(ExitCode code, const std::string& message) {
  switch (code) {
    case ExitCode::bad_input:
      throw InputError(message);
    case ExitCode::usage:
      throw ConfigError(message);
    default:
      throw Error(message, code);
  }
}

// Collective over comm: when any rank recorded a failure, every rank throws the winning one.
void agree(MPI_Comm comm, const Failure& failure) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  int mine[2] = {failure.order, rank};
  int first[2] = {INT_MAX, 0};
  TRELLIS_MPI(MPI_Allreduce(mine, first, 1, MPI_2INT, MPI_MINLOC, comm));
  if (first[0] == INT_MAX) return;
  int header[2] = {static_cast<int>(failure.code), static_cast<int>(failure.message.size())};
  TRELLIS_MPI(MPI_Bcast(header, 2, MPI_INT, first[1], comm));
  std::string message = failure.message;
  message.resize(static_cast<std::size_t>(header[1]));
  TRELLIS_MPI(MPI_Bcast(message.data(), header[1], MPI_CHAR, first[1], comm));
  throw_as(static_cast<ExitCode>(header[0]), message);
}

// FNV-1a over what every rank must pass alike.
struct LayoutHash {
  std::uint64_t value = 1469598103934665603ull;
  void bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) value = (value ^ p[i]) * 1099511628211ull;
  }
  void integer(std::int64_t v) { bytes(&v, sizeof v); }
  void text(const std::string& s) {
    integer(static_cast<std::int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void tensors(const std::vector<TensorPiece>& pieces) {
    integer(static_cast<std::int64_t>(pieces.size()));
    for (const TensorPiece& p : pieces) {
      text(p.name);
      integer(static_cast<std::int64_t>(p.logical_shape.size()));
      for (std::int64_t d : p.logical_shape) integer(d);
    }
  }
};

// Collective: whether every rank computed the same hash (max of h and of ~h).
bool same_on_all_ranks(MPI_Comm comm, std::uint64_t hash) {
  std::uint64_t mine[2] = {hash, ~hash};
  std::uint64_t max[2] = {0, 0};
  TRELLIS_MPI(MPI_Allreduce(mine, max, 2, MPI_UINT64_T, MPI_MAX, comm));
  return max[0] == ~max[1];
}

// One tensor of the file: its name and logical shape, and this rank's piece of it, if any.
struct FileTensor {
  std::string name;
  Shape shape;
  const TensorPiece* piece = nullptr;  // nullptr: this rank holds none of it
};

void append_bytes(std::string& out, const void* data, std::size_t size) {
  out.append(static_cast<const char*>(data), size);
}

template <class T>
T take(const std::string& in, std::size_t& at) {
  T value{};
  TRELLIS_REQUIRE(at + sizeof(T) <= in.size(), "truncated tensor list");
  std::memcpy(&value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

// Collective: the tensors of the file, the same list on every rank. When every rank passed the
// same names and shapes (dp/tp only), that list in its order; otherwise (pipeline stages hold
// different tensors) the union, sorted by name, gathered from one rank per distinct list.
// Throws Error on every rank alike when two ranks give one name different shapes.
std::vector<FileTensor> file_tensors(const std::vector<TensorPiece>& pieces, MPI_Comm comm) {
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  TRELLIS_MPI(MPI_Comm_size(comm, &size));
  LayoutHash hash;
  hash.tensors(pieces);
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(size));
  TRELLIS_MPI(MPI_Allgather(&hash.value, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm));
  std::vector<FileTensor> tensors;
  if (std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h == hashes[0]; })) {
    for (const TensorPiece& p : pieces)
      tensors.push_back({p.name, p.logical_shape, p.held ? &p : nullptr});
    return tensors;
  }
  // [u64 name length][name][u64 rank][i64 extents...] per tensor, from the lowest rank of
  // each distinct list only.
  std::string mine;
  const auto me = static_cast<std::size_t>(rank);
  if (std::find(hashes.begin(), hashes.end(), hashes[me]) - hashes.begin() == rank) {
    for (const TensorPiece& p : pieces) {
      const std::uint64_t length = p.name.size(), dims = p.logical_shape.size();
      append_bytes(mine, &length, sizeof length);
      mine += p.name;
      append_bytes(mine, &dims, sizeof dims);
      append_bytes(mine, p.logical_shape.data(), dims * sizeof(std::int64_t));
    }
  }
  TRELLIS_REQUIRE(mine.size() < static_cast<std::size_t>(INT_MAX), "tensor list too long");
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(counts.size(), 0);
  TRELLIS_MPI(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm));
  std::int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += counts[r];
    TRELLIS_REQUIRE(total < INT_MAX, "tensor lists too long");
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  TRELLIS_MPI(MPI_Allgatherv(mine.data(), count, MPI_CHAR, all.data(), counts.data(),
                             offsets.data(), MPI_CHAR, comm));
  std::map<std::string, Shape> shapes;
  for (std::size_t at = 0; at < all.size();) {
    const auto length = take<std::uint64_t>(all, at);
    TRELLIS_REQUIRE(at + length <= all.size(), "truncated tensor list");
    std::string name = all.substr(at, length);
    at += length;
    Shape shape(take<std::uint64_t>(all, at));
    for (std::int64_t& d : shape) d = take<std::int64_t>(all, at);
    const auto [it, added] = shapes.emplace(name, shape);
    if (!added && it->second != shape)
      throw Error("tensor '" + name + "': the ranks give it different logical shapes, " +
                  shape_string(it->second) + " and " + shape_string(shape));
  }
  std::map<std::string, const TensorPiece*> held;
  for (const TensorPiece& p : pieces)
    if (p.held) held[p.name] = &p;
  for (const auto& [name, shape] : shapes) {
    const auto it = held.find(name);
    tensors.push_back({name, shape, it == held.end() ? nullptr : it->second});
  }
  return tensors;
}

// ---- POSIX durability ----------------------------------------------------------------------

[[noreturn]] void throw_errno(const std::string& what, const std::string& path, int err) {
  throw Error("cannot " + what + " '" + path + "': " + std::strerror(err));
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) throw_errno("open", path, errno);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno("fsync", path, err);
  }
  if (::close(fd) != 0) throw_errno("close", path, errno);
}

void rename_path(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot rename '" + from + "' to '" + to + "': " + std::strerror(errno));
}

// Writes `text` to a new file at path and fsyncs it.
void write_file_durably(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("create", path, errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw_errno("write", path, err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno("fsync", path, err);
  }
  if (::close(fd) != 0) throw_errno("close", path, errno);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw Error("cannot remove '" + path + "': " + ec.message());
}

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string parent_directory(const std::string& path) {
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// step-<7 or more digits> -> step; anything else -> -1.
std::int64_t parse_step_name(const std::string& name) {
  constexpr std::size_t kPrefix = 5;  // "step-"
  if (name.compare(0, kPrefix, "step-") != 0) return -1;
  const std::size_t digits = name.size() - std::min(name.size(), kPrefix);
  if (digits < 7 || digits > 18) return -1;
  for (std::size_t i = kPrefix; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return -1;
  return std::stoll(name.substr(kPrefix));
}

// ---- HDF5 pieces ---------------------------------------------------------------------------

void check_piece(const TensorPiece& p) {
  if (p.name.empty() || p.name.front() == '/' || p.name.back() == '/' ||
      p.name.find("//") != std::string::npos)
    throw Error("bad tensor name '" + p.name + "' (expected a relative HDF5 path like a/b.c)");
  piece_shape(p.logical_shape, p.shard);  // throws for a bad shape or spec
}

std::size_t piece_numel(const TensorPiece& p) {
  return static_cast<std::size_t>(shape_numel(piece_shape(p.logical_shape, p.shard)));
}

void check_local_size(const TensorPiece& p) {
  const std::size_t numel = piece_numel(p);
  if (p.local.extent(0) != numel)
    throw Error("tensor '" + p.name + "': local piece has " + std::to_string(p.local.extent(0)) +
                " elements, its shard of " + shape_string(p.logical_shape) + " has " +
                std::to_string(numel));
}

// Names, shapes and specs of this rank's pieces; the sizes of those it writes (for_writing) or
// reads (all it holds).
void check_pieces(const std::vector<TensorPiece>& pieces, bool for_writing) {
  std::set<std::string> names;
  for (const TensorPiece& p : pieces) {
    check_piece(p);
    if (!names.insert(p.name).second) throw Error("tensor '" + p.name + "' appears twice");
    if (!p.held && p.writer) throw Error("tensor '" + p.name + "': a writer must hold a piece");
    if (p.held && (p.writer || !for_writing)) check_local_size(p);
  }
}

H5Space file_space(const Shape& logical) {
  if (logical.empty()) return H5Space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  const std::vector<hsize_t> dims(logical.begin(), logical.end());
  return H5Space(TRELLIS_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
}

// Selects the piece in the file dataspace: everything (not sharded), one strided hyperslab
// (along dim: start index*piece, stride parts*piece, count sections, block piece), or nothing
// (p == nullptr: this rank takes part in the transfer without a piece).
void select_piece(hid_t space, const TensorPiece* p) {
  if (p == nullptr || shape_numel(p->logical_shape) == 0) {
    TRELLIS_H5(H5Sselect_none(space));
    return;
  }
  if (!p->shard.sharded()) {
    TRELLIS_H5(H5Sselect_all(space));
    return;
  }
  const std::size_t rank = p->logical_shape.size();
  const auto dim = static_cast<std::size_t>(p->shard.dim);
  std::vector<hsize_t> start(rank, 0), stride(rank, 1), count(rank, 1);
  std::vector<hsize_t> block(p->logical_shape.begin(), p->logical_shape.end());
  const auto piece = block[dim] / static_cast<hsize_t>(p->shard.sections * p->shard.parts);
  start[dim] = static_cast<hsize_t>(p->shard.index) * piece;
  stride[dim] = static_cast<hsize_t>(p->shard.parts) * piece;
  count[dim] = static_cast<hsize_t>(p->shard.sections);
  block[dim] = piece;
  TRELLIS_H5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), stride.data(), count.data(),
                                 block.data()));
}

// 1-D memory dataspace of `count` floats (at least one element, so that the buffer pointer may
// be a dummy; nothing selected when count is 0).
H5Space memory_space(std::size_t count) {
  const hsize_t size = std::max<hsize_t>(count, 1);
  H5Space space(TRELLIS_H5(H5Screate_simple(1, &size, nullptr)));
  if (count == 0) TRELLIS_H5(H5Sselect_none(space.get()));
  return space;
}

void write_scalar_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type,
                            const void* value) {
  H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  H5Attribute attribute(
      TRELLIS_H5(H5Acreate2(object, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
  TRELLIS_H5(H5Awrite(attribute.get(), memory_type, value));
}

std::uint64_t read_checksum_attribute(hid_t object) {
  if (!has_attribute(object, "checksum")) throw InputError("attribute 'checksum' is missing");
  H5Attribute attribute(TRELLIS_H5(H5Aopen(object, "checksum", H5P_DEFAULT)));
  H5Type type(TRELLIS_H5(H5Aget_type(attribute.get())));
  H5Space space(TRELLIS_H5(H5Aget_space(attribute.get())));
  if (H5Tget_class(type.get()) != H5T_INTEGER ||
      TRELLIS_H5(H5Sget_simple_extent_npoints(space.get())) != 1)
    throw InputError("attribute 'checksum': expected one uint64, found " +
                     hdf5_type_name(type.get()));
  std::uint64_t value = 0;
  TRELLIS_H5(H5Aread(attribute.get(), H5T_NATIVE_UINT64, &value));
  return value;
}

void check_float32(hid_t dataset) {
  H5Type type(TRELLIS_H5(H5Dget_type(dataset)));
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    throw InputError("expected float32, found " + hdf5_type_name(type.get()));
}

Shape dataset_shape(hid_t dataset) {
  H5Space space(TRELLIS_H5(H5Dget_space(dataset)));
  const int rank = TRELLIS_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) TRELLIS_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return Shape(dims.begin(), dims.end());
}

// Root attributes format / format_version; throws InputError (without the file name).
void check_format(hid_t file) {
  if (!has_attribute(file, "format") || read_string_attribute(file, "format") != kCheckpointFormat)
    throw InputError(std::string("not a trellis checkpoint (attribute 'format' is not \"") +
                     kCheckpointFormat + "\")");
  const std::int64_t version = read_int_attribute(file, "format_version");
  if (version < 1 || version > kCheckpointFormatVersion)
    throw InputError("format_version " + std::to_string(version) +
                     " is not supported (this build reads 1.." +
                     std::to_string(kCheckpointFormatVersion) + ")");
}

// Opens a checkpoint file on comm with the MPI-IO driver (collective) and checks its format.
H5File open_parallel(const std::string& path, MPI_Comm comm, const Hdf5Tuning& tuning) {
  Hdf5Tuning t = tuning;
  t.collective_metadata_reads = false;  // tensors are opened by single ranks (verify)
  H5Plist fapl = make_parallel_file_access(comm, t);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0)
    throw InputError("cannot open the checkpoint file (missing, truncated or not HDF5): " +
                     hdf5_error_detail());
  H5File file(id);
  check_format(file.get());
  return file;
}

// Opens tensor `name`, checking that it exists, is float32 and has the expected shape.
H5Dataset open_tensor(hid_t file, const std::string& name, const Shape& expected) {
  for (std::size_t end = name.find('/');; end = name.find('/', end + 1)) {
    const std::string prefix = name.substr(0, end);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) {
      hdf5_error_detail();  // clears the stack
      throw InputError("missing from the checkpoint");
    }
    if (end == std::string::npos) break;
  }
  const hid_t id = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (id < 0) throw InputError("not a dataset: " + hdf5_error_detail());
  H5Dataset dataset(id);
  check_float32(dataset.get());
  const Shape found = dataset_shape(dataset.get());
  if (found != expected)
    throw InputError("expected logical shape " + shape_string(expected) + ", found " +
                     shape_string(found));
  return dataset;
}

// Every dataset in the file by path, in name order (the same on every rank).
herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
  if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

std::vector<std::string> list_datasets(hid_t file) {
  std::vector<std::string> links;
  TRELLIS_H5(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_link, &links));
  std::vector<std::string> datasets;
  for (const std::string& link : links) {
    H5Object object(TRELLIS_H5(H5Oopen(file, link.c_str(), H5P_DEFAULT)));
    if (H5Iget_type(object.get()) == H5I_DATASET) datasets.push_back(link);
  }
  return datasets;
}

// Recomputes tensor `name`'s checksum from the file (independent reads, blocks of rows).
void verify_tensor(hid_t file, const std::string& name) {
  H5Dataset dataset(TRELLIS_H5(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  check_float32(dataset.get());
  const std::uint64_t stored = read_checksum_attribute(dataset.get());
  const Shape shape = dataset_shape(dataset.get());
  const auto numel = static_cast<std::uint64_t>(shape_numel(shape));
  std::uint64_t computed = 0;
  if (numel > 0) {
    H5Space space(TRELLIS_H5(H5Dget_space(dataset.get())));
    const std::uint64_t rows = shape.empty() ? 1 : static_cast<std::uint64_t>(shape[0]);
    const std::uint64_t row = numel / rows;
    const std::uint64_t block_rows = std::max<std::uint64_t>(1, kVerifyBlockElements / row);
    std::vector<float> buffer(static_cast<std::size_t>(std::min(rows, block_rows) * row));
    std::vector<hsize_t> start(shape.size(), 0);
    std::vector<hsize_t> count(shape.begin(), shape.end());
    for (std::uint64_t r0 = 0; r0 < rows; r0 += block_rows) {
      const std::uint64_t n = std::min(block_rows, rows - r0);
      if (!shape.empty()) {
        start[0] = r0;
        count[0] = n;
        TRELLIS_H5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                       count.data(), nullptr));
      }
      H5Space memory = memory_space(static_cast<std::size_t>(n * row));
      TRELLIS_H5(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT,
                         buffer.data()));
      kernels::ShardIndexMap map;
      map.first = r0 * row;
      computed += checkpoint_checksum(buffer.data(), static_cast<std::size_t>(n * row), map);
    }
  }
  if (computed != stored) {
    char text[96];
    std::snprintf(text, sizeof text, "stored 0x%016llx, computed 0x%016llx",
                  static_cast<unsigned long long>(stored),
                  static_cast<unsigned long long>(computed));
    throw InputError(std::string("checksum mismatch (") + text + "): the data is corrupt");
  }
}

void write_info_attributes(hid_t file, const CheckpointInfo& info) {
  write_string_attribute(file, "format", kCheckpointFormat);
  write_int_attribute(file, "format_version", kCheckpointFormatVersion);
  write_scalar_attribute(file, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, &info.step);
  write_string_attribute(file, "config", info.config_ini);
  write_string_attribute(file, "build", info.build_info);
  for (const auto& [name, value] : info.counters)
    write_scalar_attribute(file, name.c_str(), H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

// The open state.h5 of a checkpoint being written. The file is declared first, so that it
// closes after its datasets.
struct StateFile {
  H5File file;
  H5Plist lcpl, dcpl, dxpl;
  std::vector<H5Dataset> datasets;
};

// Collective: creates `path` with the root attributes.
StateFile create_state_file(const std::string& path, const CheckpointInfo& info, MPI_Comm comm,
                            const Hdf5Tuning& tuning) {
  Hdf5Tuning t = tuning;
  t.collective_metadata_reads = false;
  H5Plist fapl = make_parallel_file_access(comm, t);
  if (tuning.alignment > 1)
    TRELLIS_H5(H5Pset_alignment(fapl.get(), tuning.alignment_threshold, tuning.alignment));
  StateFile f;
  f.file = H5File(TRELLIS_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get())));
  write_info_attributes(f.file.get(), info);
  f.lcpl = H5Plist(TRELLIS_H5(H5Pcreate(H5P_LINK_CREATE)));
  TRELLIS_H5(H5Pset_create_intermediate_group(f.lcpl.get(), 1));
  f.dcpl = H5Plist(TRELLIS_H5(H5Pcreate(H5P_DATASET_CREATE)));
  TRELLIS_H5(H5Pset_fill_time(f.dcpl.get(), H5D_FILL_TIME_NEVER));  // every element is written
  TRELLIS_H5(H5Pset_alloc_time(f.dcpl.get(), H5D_ALLOC_TIME_EARLY));
  f.dxpl = H5Plist(TRELLIS_H5(H5Pcreate(H5P_DATASET_XFER)));
  TRELLIS_H5(H5Pset_dxpl_mpio(f.dxpl.get(), H5FD_MPIO_COLLECTIVE));
  return f;
}

// Collective: creates t's dataset and writes `host` (this rank's piece; empty: nothing, the
// rank takes part with an empty selection).
void write_tensor(StateFile& f, const FileTensor& t, const HostFloatView& host) {
  H5Space space = file_space(t.shape);
  f.datasets.emplace_back(
      TRELLIS_H5(H5Dcreate2(f.file.get(), t.name.c_str(), H5T_IEEE_F32LE, space.get(), f.lcpl.get(),
                            f.dcpl.get(), H5P_DEFAULT)));
  // An empty tensor has no storage to write to (HDF5 fails even an empty transfer); every
  // rank skips it alike.
  if (shape_numel(t.shape) == 0) return;
  const std::size_t count = host.extent(0);
  select_piece(space.get(), count > 0 ? t.piece : nullptr);
  H5Space memory = memory_space(count);
  const float dummy = 0.0f;
  TRELLIS_H5(H5Dwrite(f.datasets.back().get(), H5T_NATIVE_FLOAT, memory.get(), space.get(),
                      f.dxpl.get(), count > 0 ? host.data() : &dummy));
}

// Rank 0, after every rank closed the file: make it durable, publish it, prune old ones.
void publish(const std::string& root, const std::string& name, int keep) {
  const std::string final_dir = root + "/" + name;
  const std::string tmp_dir = final_dir + ".tmp";
  fsync_path(tmp_dir + "/" + kCheckpointFileName, false);
  fsync_path(tmp_dir, true);
  // Rewriting a step: move the old directory aside (rename(2) does not replace a non-empty
  // directory); "*.old" is not a step name, so listings skip it until it is removed.
  std::string old_dir;
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    old_dir = final_dir + ".old";
    remove_tree(old_dir);
    rename_path(final_dir, old_dir);
  }
  rename_path(tmp_dir, final_dir);
  fsync_path(root, true);
  write_file_durably(root + "/latest.tmp", name + "\n");
  rename_path(root + "/latest.tmp", root + "/latest");
  fsync_path(root, true);
  if (!old_dir.empty()) remove_tree(old_dir);
  if (keep > 0) {
    const std::vector<std::string> all = list_checkpoints(root);
    bool removed = false;
    for (std::size_t i = static_cast<std::size_t>(keep); i < all.size(); ++i) {
      if (all[i] == final_dir) continue;
      remove_tree(all[i]);
      removed = true;
    }
    if (removed) fsync_path(root, true);
  }
}

}  // namespace

// ---- helpers -------------------------------------------------------------------------------

std::string checkpoint_dir_name(std::int64_t step) {
  TRELLIS_REQUIRE(step >= 0, "checkpoint step must not be negative");
  char text[32];
  std::snprintf(text, sizeof text, "step-%07lld", static_cast<long long>(step));
  return text;
}

std::uint64_t checkpoint_checksum(const float* values, std::size_t count,
                                  const kernels::ShardIndexMap& map) {
  std::uint64_t sum = 0;
  for (std::size_t e = 0; e < count; ++e) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, values + e, sizeof bits);
    sum += checkpoint_mix(map(e), bits);
  }
  return sum;
}

Shape piece_shape(const Shape& logical, const nn::ShardSpec& shard) {
  for (std::int64_t d : logical)
    if (d < 0) throw Error("negative extent in shape " + shape_string(logical));
  if (!shard.sharded()) return logical;
  if (static_cast<std::size_t>(shard.dim) >= logical.size() || shard.index < 0 ||
      shard.index >= shard.parts || shard.sections < 1)
    throw Error("bad shard spec (dim " + std::to_string(shard.dim) + ", parts " +
                std::to_string(shard.parts) + ", index " + std::to_string(shard.index) +
                ", sections " + std::to_string(shard.sections) + ") for shape " +
                shape_string(logical));
  const auto dim = static_cast<std::size_t>(shard.dim);
  const std::int64_t divisor = static_cast<std::int64_t>(shard.sections) * shard.parts;
  if (logical[dim] % divisor != 0)
    throw Error("shape " + shape_string(logical) + ": dim " + std::to_string(dim) +
                " cannot be split " + std::to_string(shard.sections) + " x " +
                std::to_string(shard.parts) + " ways");
  Shape piece = logical;
  piece[dim] = logical[dim] / shard.parts;
  return piece;
}

kernels::ShardIndexMap piece_index_map(const Shape& logical, const nn::ShardSpec& shard) {
  piece_shape(logical, shard);  // validates
  kernels::ShardIndexMap map;
  if (!shard.sharded()) return map;
  const auto dim = static_cast<std::size_t>(shard.dim);
  std::uint64_t inner = 1;
  for (std::size_t k = dim + 1; k < logical.size(); ++k)
    inner *= static_cast<std::uint64_t>(logical[k]);
  map.inner = inner;
  map.sections = static_cast<std::uint64_t>(shard.sections);
  map.parts = static_cast<std::uint64_t>(shard.parts);
  map.index = static_cast<std::uint64_t>(shard.index);
  map.piece = static_cast<std::uint64_t>(logical[dim]) / (map.sections * map.parts);
  return map;
}

// ---- write ---------------------------------------------------------------------------------

std::string write_checkpoint(const std::string& root_path, const std::vector<TensorPiece>& pieces,
                             const CheckpointInfo& info, int keep, MPI_Comm comm,
                             const Hdf5Tuning& tuning) {
  hdf5_quiet();
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  const std::string root = strip_trailing_slashes(root_path);
  std::string name, final_dir, tmp_dir;
  LayoutHash layout;  // of what every rank must pass alike
  Failure failure;

  // 1. Local checks.
  capture(failure, -1, "write_checkpoint: ", false, [&] {
    name = checkpoint_dir_name(info.step);
    final_dir = root + "/" + name;
    tmp_dir = final_dir + ".tmp";
    for (const auto& [counter, value] : info.counters)
      if (counter.empty() || reserved_attribute(counter))
        throw Error("counter name '" + counter + "' is empty or reserved");
    layout.text(root);
    layout.integer(info.step);
    layout.integer(keep);
    layout.text(info.config_ini);
    layout.text(info.build_info);
    for (const auto& [counter, value] : info.counters) {
      layout.text(counter);
      layout.integer(value);
    }
    check_pieces(pieces, true);
  });
  agree(comm, failure);
  if (!same_on_all_ranks(comm, layout.value))
    throw Error("write_checkpoint: the ranks passed different roots, steps, keep counts or infos");
  const std::vector<FileTensor> tensors = file_tensors(pieces, comm);
  const std::size_t n = tensors.size();

  // 2. Coverage: the writers' pieces must add up to each tensor exactly.
  std::vector<std::uint64_t> written(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    if (tensors[i].piece != nullptr && tensors[i].piece->writer)
      written[i] = tensors[i].piece->local.extent(0);
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, written.data(), static_cast<int>(n), MPI_UINT64_T,
                            MPI_SUM, comm));
  for (std::size_t i = 0; i < n; ++i) {
    const auto numel = static_cast<std::uint64_t>(shape_numel(tensors[i].shape));
    if (written[i] != numel)
      throw Error("write_checkpoint: tensor '" + tensors[i].name + "' " +
                  shape_string(tensors[i].shape) + ": the writers' pieces hold " +
                  std::to_string(written[i]) + " elements, the tensor has " +
                  std::to_string(numel) + " (exactly one writer per distinct piece)");
  }

  // 3. Rank 0 makes <root>/step-NNNNNNN.tmp (empty).
  capture(failure, -1, "write_checkpoint: ", false, [&] {
    if (rank != 0) return;
    std::error_code ec;
    const bool created = fs::create_directories(root, ec);
    if (ec) throw Error("cannot create '" + root + "': " + ec.message());
    if (created) fsync_path(parent_directory(root), true);
    remove_tree(tmp_dir);
    if (!fs::create_directory(tmp_dir, ec) || ec)
      throw Error("cannot create '" + tmp_dir + "': " + (ec ? ec.message() : "exists"));
  });
  agree(comm, failure);

  // 4. Every rank writes state.h5 (collective). Writers copy one piece at a time to the host
  // and hash it there; a rank whose copy fails still takes part, with an empty selection.
  const std::string path = tmp_dir + "/" + kCheckpointFileName;
  try {
    StateFile state;
    std::vector<std::uint64_t> checksums(n, 0);
    capture(failure, -1, path + ": ", false, [&] {
      state = create_state_file(path, info, comm, tuning);
      Kokkos::fence();
      for (std::size_t i = 0; i < n; ++i) {
        const TensorPiece* p = tensors[i].piece;
        HostFloatView host;
        capture(failure, static_cast<int>(i), path + ": tensor '" + tensors[i].name + "': ", false,
                [&] {
                  if (p == nullptr || !p->writer) return;
                  host = Kokkos::create_mirror_view_and_copy(HostSpace(), p->local);
                  checksums[i] = checkpoint_checksum(host.data(), host.extent(0),
                                                     piece_index_map(p->logical_shape, p->shard));
                });
        write_tensor(state, tensors[i], host);
      }
    });
    agree(comm, failure);
    TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, checksums.data(), static_cast<int>(n), MPI_UINT64_T,
                              MPI_SUM, comm));
    capture(failure, -1, path + ": ", false, [&] {
      for (std::size_t i = 0; i < n; ++i)
        write_scalar_attribute(state.datasets[i].get(), "checksum", H5T_STD_U64LE,
                               H5T_NATIVE_UINT64, &checksums[i]);
      // MPI_File_sync on every rank (the MPI-IO driver syncs on flush, not on close).
      TRELLIS_H5(H5Fflush(state.file.get(), H5F_SCOPE_GLOBAL));
      state.datasets.clear();
      state.file.reset();
    });
    agree(comm, failure);
  } catch (...) {
    std::error_code ec;
    if (rank == 0) fs::remove_all(tmp_dir, ec);  // best effort; "*.tmp" is ignored anyway
    throw;
  }

  // 5. Rank 0 syncs, renames, updates `latest`, prunes.
  capture(failure, -1, "write_checkpoint: ", false, [&] {
    if (rank == 0) publish(root, name, keep);
  });
  agree(comm, failure);
  return final_dir;
}

// ---- list / info ---------------------------------------------------------------------------

std::vector<std::string> list_checkpoints(const std::string& root_path) {
  const std::string root = strip_trailing_slashes(root_path);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  std::vector<std::pair<std::int64_t, std::string>> steps;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::int64_t step = parse_step_name(name);
    std::error_code type_ec;
    if (step >= 0 && it->is_directory(type_ec)) steps.emplace_back(step, name);
  }
  if (ec) throw Error("cannot list '" + root + "': " + ec.message());
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });

  std::string latest;
  std::ifstream in(root + "/latest");
  if (in) std::getline(in, latest);
  while (!latest.empty() && std::isspace(static_cast<unsigned char>(latest.back())))
    latest.pop_back();

  std::vector<std::string> paths;
  for (const auto& s : steps)
    if (s.second == latest) paths.push_back(root + "/" + s.second);
  for (const auto& s : steps)
    if (s.second != latest) paths.push_back(root + "/" + s.second);
  return paths;
}

namespace {

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& dir) {
  hdf5_quiet();
  const std::string path = strip_trailing_slashes(dir) + "/" + kCheckpointFileName;
  try {
    const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0)
      throw InputError("cannot open the checkpoint file (missing, truncated or not HDF5): " +
                       hdf5_error_detail());
    H5File file(id);
    check_format(file.get());
    CheckpointInfo info;
    info.step = read_int_attribute(file.get(), "step");
    info.config_ini = read_string_attribute(file.get(), "config");
    info.build_info = read_string_attribute(file.get(), "build");
    std::vector<std::string> names;
    hsize_t index = 0;
    TRELLIS_H5(
        H5Aiterate2(file.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute, &names));
    for (const std::string& name : names) {
      if (reserved_attribute(name)) continue;
      H5Attribute attribute(TRELLIS_H5(H5Aopen(file.get(), name.c_str(), H5P_DEFAULT)));
      H5Type type(TRELLIS_H5(H5Aget_type(attribute.get())));
      if (H5Tget_class(type.get()) != H5T_INTEGER) continue;  // not a counter: skipped
      info.counters[name] = read_int_attribute(file.get(), name.c_str());
    }
    return info;
  } catch (const Error& e) {
    throw InputError(path + ": " + e.what());
  }
}

// ---- verify / read -------------------------------------------------------------------------

void verify_checkpoint(const std::string& dir, MPI_Comm comm, const Hdf5Tuning& tuning) {
  hdf5_quiet();
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  TRELLIS_MPI(MPI_Comm_size(comm, &size));
  const std::string path = strip_trailing_slashes(dir) + "/" + kCheckpointFileName;
  Failure failure;
  H5File file;  // before anything opened inside it
  std::vector<std::string> names;
  capture(failure, -1, path + ": ", true, [&] {
    file = open_parallel(path, comm, tuning);
    names = list_datasets(file.get());
  });
  agree(comm, failure);
  for (std::size_t i = static_cast<std::size_t>(rank); i < names.size();
       i += static_cast<std::size_t>(size)) {
    capture(failure, static_cast<int>(i), path + ": tensor '" + names[i] + "': ", true,
            [&] { verify_tensor(file.get(), names[i]); });
    if (failure.order != INT_MAX) break;  // later tensors cannot win over this one
  }
  agree(comm, failure);
}

void read_checkpoint(const std::string& dir, const std::vector<TensorPiece>& pieces, MPI_Comm comm,
                     const Hdf5Tuning& tuning) {
  hdf5_quiet();
  const std::string path = strip_trailing_slashes(dir) + "/" + kCheckpointFileName;
  Failure failure;

  // 1. Local checks; the tensors every rank takes part in.
  capture(failure, -1, "read_checkpoint: ", false, [&] { check_pieces(pieces, false); });
  agree(comm, failure);
  const std::vector<FileTensor> tensors = file_tensors(pieces, comm);
  const std::size_t n = tensors.size();

  // 2. Open the file and every tensor; every rank checks every tensor alike.
  H5File file;
  std::vector<H5Dataset> datasets(n);
  capture(failure, -1, path + ": ", true, [&] { file = open_parallel(path, comm, tuning); });
  agree(comm, failure);
  for (std::size_t i = 0; i < n && failure.order == INT_MAX; ++i)
    capture(failure, static_cast<int>(i), path + ": tensor '" + tensors[i].name + "': ", true,
            [&] { datasets[i] = open_tensor(file.get(), tensors[i].name, tensors[i].shape); });
  agree(comm, failure);

  // 3. Collective reads, one tensor at a time through a host mirror; a failure on one tensor
  // does not skip the later collectives.
  H5Plist dxpl(TRELLIS_H5(H5Pcreate(H5P_DATASET_XFER)));
  TRELLIS_H5(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE));
  for (std::size_t i = 0; i < n; ++i) {
    const TensorPiece* p = tensors[i].piece;
    capture(failure, static_cast<int>(i), path + ": tensor '" + tensors[i].name + "': ", true, [&] {
      if (shape_numel(tensors[i].shape) == 0) return;  // no storage (see write_tensor)
      H5Space space(TRELLIS_H5(H5Dget_space(datasets[i].get())));
      HostFloatView host;
      if (p != nullptr) host = Kokkos::create_mirror_view(HostSpace(), p->local);
      const std::size_t count = host.extent(0);
      select_piece(space.get(), count > 0 ? p : nullptr);
      H5Space memory = memory_space(count);
      float dummy = 0.0f;
      TRELLIS_H5(H5Dread(datasets[i].get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), dxpl.get(),
                         count > 0 ? host.data() : &dummy));
      if (count > 0) Kokkos::deep_copy(p->local, host);
    });
  }
  agree(comm, failure);
}

}  // namespace trellis
