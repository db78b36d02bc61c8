// read_tensor_file() and verify_tensor_file(): the collective readers of the tensor file.
#include "trellis/train/files/tensor_file.hpp"

#include "tensor_file_impl.hpp"
#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/data/hdf5_attributes.hpp"

#include <algorithm>
#include <cstdio>

namespace trellis {

namespace {

using tensor_file::FileTensor;
using H5Object = H5Handle<H5Oclose>;

constexpr std::size_t kVerifyBlockElements = std::size_t{16} << 20;  // 64 MiB of float32

// Opens tensor `name`, checking that it exists, is float32 and has the expected shape.
H5Dataset open_tensor(hid_t file, const std::string& name, const Shape& expected) {
  for (std::size_t end = name.find('/');; end = name.find('/', end + 1)) {
    const std::string prefix = name.substr(0, end);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) {
      hdf5_error_detail();  // clears the stack
      throw InputError("missing from the file");
    }
    if (end == std::string::npos) break;
  }
  const hid_t id = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (id < 0) throw InputError("not a dataset: " + hdf5_error_detail());
  H5Dataset dataset(id);
  tensor_file::check_float32(dataset.get());
  const Shape found = tensor_file::dataset_shape(dataset.get());
  if (found != expected)
    throw InputError("expected logical shape " + shape_string(expected) + ", found " +
                     shape_string(found));
  return dataset;
}

herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
  if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

// Every dataset in the file by path, in name order (the same on every rank).
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

// Recomputes tensor `name`'s checksum from the file (independent reads, blocks of rows).
void verify_tensor(hid_t file, const std::string& name) {
  H5Dataset dataset(TRELLIS_H5(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  tensor_file::check_float32(dataset.get());
  const std::uint64_t stored = read_checksum_attribute(dataset.get());
  const Shape shape = tensor_file::dataset_shape(dataset.get());
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
      H5Space memory = tensor_file::memory_space(static_cast<std::size_t>(n * row));
      TRELLIS_H5(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT,
                         buffer.data()));
      computed += checkpoint_checksum(buffer.data(), static_cast<std::size_t>(n * row), {},
                                      static_cast<std::size_t>(r0 * row));
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

}  // namespace

void verify_tensor_file(const std::string& path, const std::function<void(hid_t file)>& check_root,
                        MPI_Comm comm, const Hdf5Tuning& tuning) {
  hdf5_quiet();
  int rank = 0, size = 1;
  TRELLIS_MPI(MPI_Comm_rank(comm, &rank));
  TRELLIS_MPI(MPI_Comm_size(comm, &size));
  PhaseFailure failure;
  H5File file;  // before anything opened inside it
  std::vector<std::string> names;
  capture(failure, PhaseFailure::kWhole, path + ": ", true, [&] {
    file = tensor_file::open_parallel(path, comm, tuning, check_root);
    names = list_datasets(file.get());
  });
  agree(comm, failure);
  for (std::size_t i = static_cast<std::size_t>(rank); i < names.size();
       i += static_cast<std::size_t>(size)) {
    capture(failure, static_cast<int>(i), path + ": tensor '" + names[i] + "': ", true,
            [&] { verify_tensor(file.get(), names[i]); });
    if (failure.failed()) break;  // later tensors cannot win over this one
  }
  agree(comm, failure);
}

void read_tensor_file(const std::string& path, const std::vector<TensorPiece>& pieces,
                      const std::function<void(hid_t file)>& check_root, MPI_Comm comm,
                      const Hdf5Tuning& tuning) {
  hdf5_quiet();
  PhaseFailure failure;

  // 1. Local checks; the tensors every rank takes part in.
  capture(failure, PhaseFailure::kWhole, path + ": ", false,
          [&] { tensor_file::check_pieces(pieces, false); });
  agree(comm, failure);
  const std::vector<FileTensor> tensors = tensor_file::file_tensors(pieces, comm);
  const std::size_t n = tensors.size();

  // 2. Open the file and every tensor; every rank checks every tensor alike.
  H5File file;
  std::vector<H5Dataset> datasets(n);
  capture(failure, PhaseFailure::kWhole, path + ": ", true,
          [&] { file = tensor_file::open_parallel(path, comm, tuning, check_root); });
  agree(comm, failure);
  for (std::size_t i = 0; i < n && !failure.failed(); ++i)
    capture(failure, static_cast<int>(i), path + ": tensor '" + tensors[i].name + "': ", true,
            [&] { datasets[i] = open_tensor(file.get(), tensors[i].name, tensors[i].shape); });
  agree(comm, failure);

  // 3. Collective reads, one tensor at a time through a host mirror. A rank whose local
  // preparation fails (allocation, selection) still joins the collective read, with an empty
  // selection, so no rank is left waiting; the failure is agreed at the end.
  H5Plist dxpl(TRELLIS_H5(H5Pcreate(H5P_DATASET_XFER)));
  TRELLIS_H5(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE));
  for (std::size_t i = 0; i < n; ++i) {
    const FileTensor& t = tensors[i];
    if (shape_numel(t.shape) == 0) continue;  // no storage (see write_tensor): every rank skips
    const std::string where = path + ": tensor '" + t.name + "': ";
    H5Space space, memory;
    HostFloatView host;  // the parts back to back (one part: its own host mirror)
    bool prepared = false;
    capture(failure, static_cast<int>(i), where, true, [&] {
      space = tensor_file::file_space(t.shape);  // the dataset's shape, checked when opened
      if (t.parts.size() == 1)
        host = Kokkos::create_mirror_view(HostSpace(), t.parts[0]->local);
      else if (t.parts.size() > 1)
        host = HostFloatView("trellis::tensor_file::parts", t.local_count());
      tensor_file::select_parts(space.get(),
                                host.extent(0) > 0 ? t.parts : std::vector<const TensorPiece*>{});
      memory = tensor_file::memory_space(host.extent(0));
      prepared = true;
    });
    capture(failure, static_cast<int>(i), where, true, [&] {
      if (!prepared) {  // take part without data
        host = HostFloatView();
        space = tensor_file::file_space(t.shape);
        TRELLIS_H5(H5Sselect_none(space.get()));
        memory = tensor_file::memory_space(0);
      }
      float dummy = 0.0f;
      const std::size_t count = host.extent(0);
      TRELLIS_H5(H5Dread(datasets[i].get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), dxpl.get(),
                         count > 0 ? host.data() : &dummy));
      if (!prepared) return;
      std::size_t at = 0;
      for (const TensorPiece* p : t.parts) {
        const std::size_t k = p->local.extent(0);
        if (t.parts.size() == 1)
          Kokkos::deep_copy(p->local, host);
        else
          Kokkos::deep_copy(p->local, Kokkos::subview(host, std::make_pair(at, at + k)));
        at += k;
      }
    });
  }
  agree(comm, failure);
}

}  // namespace trellis
