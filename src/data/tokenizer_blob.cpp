#include "trellis/data/tokenizer_blob.hpp"

#include "trellis/core/error.hpp"
#include "trellis/data/hdf5.hpp"

#include <vector>

namespace trellis {

std::string read_tokenizer_json(hid_t file, const std::string& path) {
  hdf5_quiet();
  if (H5Lexists(file, kTokenizerDataset, H5P_DEFAULT) <= 0) return "";
  H5Dataset data(H5Dopen2(file, kTokenizerDataset, H5P_DEFAULT));
  if (!data.valid()) throw InputError(path + ": cannot open /" + kTokenizerDataset);
  H5Space space(TRELLIS_H5(H5Dget_space(data.get())));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0 || H5Sget_simple_extent_ndims(space.get()) != 1)
    throw InputError(path + ": /" + kTokenizerDataset + " must be one-dimensional bytes");
  std::vector<char> bytes(static_cast<std::size_t>(n));
  if (n > 0 &&
      H5Dread(data.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0)
    throw InputError(path + ": cannot read /" + kTokenizerDataset + ": " + hdf5_error_detail());
  return std::string(bytes.begin(), bytes.end());
}

std::string read_tokenizer_json(const std::string& path) {
  hdf5_quiet();
  H5File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) throw InputError(path + ": cannot open: " + hdf5_error_detail());
  return read_tokenizer_json(file.get(), path);
}

void write_tokenizer_json(hid_t file, const std::string& json) {
  if (json.empty()) return;
  const hsize_t n = json.size();
  H5Space space(TRELLIS_H5(H5Screate_simple(1, &n, nullptr)));
  H5Dataset data(TRELLIS_H5(H5Dcreate2(file, kTokenizerDataset, H5T_STD_U8LE, space.get(),
                                       H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  TRELLIS_H5(H5Dwrite(data.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, json.data()));
}

}  // namespace trellis
