#include "trellis/data/hdf5.hpp"

namespace trellis {

void hdf5_quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

long hdf5_open_files() {
  const ssize_t count = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE);
  return count > 0 ? static_cast<long>(count) : 0;
}

namespace {

// H5Ewalk2 callback: keeps the first entry walking upward, i.e. the innermost one, which is
// where the library noticed the problem (the outer entries just say "can't open dataset").
herr_t keep_innermost(unsigned n, const H5E_error2_t* entry, void* client) {
  if (n == 0 && entry != nullptr) {
    auto* out = static_cast<std::string*>(client);
    if (entry->desc != nullptr) *out = entry->desc;
    if (entry->func_name != nullptr) *out += std::string(" (in ") + entry->func_name + ")";
  }
  return 0;
}

}  // namespace

std::string hdf5_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  return detail;
}

std::string hdf5_type_name(hid_t type) {
  const std::string bits = std::to_string(8 * H5Tget_size(type));
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + bits;
    case H5T_FLOAT:
      return "float" + bits;
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "vlen";
    default:
      return "unsupported type";
  }
}

}  // namespace trellis
