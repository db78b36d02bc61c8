#include "trellis/data/hdf5_attributes.hpp"

#include "trellis/data/hdf5.hpp"

namespace trellis {

namespace {

struct OpenAttribute {
  H5Attribute attribute;
  H5Type type;
  H5Space space;
  hssize_t count;  // number of values (1 for a scalar)
};

OpenAttribute open_attribute(hid_t object, const char* name) {
  if (!has_attribute(object, name)) {
    throw InputError(std::string("attribute '") + name + "' is missing");
  }
  OpenAttribute a;
  a.attribute = H5Attribute(TRELLIS_H5(H5Aopen(object, name, H5P_DEFAULT)));
  a.type = H5Type(TRELLIS_H5(H5Aget_type(a.attribute.get())));
  a.space = H5Space(TRELLIS_H5(H5Aget_space(a.attribute.get())));
  a.count = TRELLIS_H5(H5Sget_simple_extent_npoints(a.space.get()));
  return a;
}

[[noreturn]] void wrong_kind(const char* name, const char* expected, const OpenAttribute& a) {
  std::string found = hdf5_type_name(a.type.get());
  if (a.count != 1) found += " with " + std::to_string(a.count) + " values";
  throw InputError(std::string("attribute '") + name + "': expected " + expected + ", found " +
                   found);
}

// Creates (replacing any old one) an attribute of `file_type` over `space`.
H5Attribute create_attribute(hid_t object, const char* name, hid_t file_type, hid_t space) {
  if (has_attribute(object, name)) TRELLIS_H5(H5Adelete(object, name));
  return H5Attribute(
      TRELLIS_H5(H5Acreate2(object, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT)));
}

}  // namespace

bool has_attribute(hid_t object, const char* name) {
  return TRELLIS_H5(H5Aexists(object, name)) > 0;
}

std::string read_string_attribute(hid_t object, const char* name) {
  OpenAttribute a = open_attribute(object, name);
  if (H5Tget_class(a.type.get()) != H5T_STRING || a.count != 1) wrong_kind(name, "a string", a);

  // Read in the file's own character set: HDF5 does not convert between ASCII and UTF-8.
  H5Type memory(TRELLIS_H5(H5Tcopy(H5T_C_S1)));
  TRELLIS_H5(H5Tset_cset(memory.get(), H5Tget_cset(a.type.get())));
  if (TRELLIS_H5(H5Tis_variable_str(a.type.get())) > 0) {
    TRELLIS_H5(H5Tset_size(memory.get(), H5T_VARIABLE));
    char* text = nullptr;
    TRELLIS_H5(H5Aread(a.attribute.get(), memory.get(), &text));
    std::string value = text != nullptr ? text : "";
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(memory.get(), a.space.get(), H5P_DEFAULT, &text);
#else
    H5Dvlen_reclaim(memory.get(), a.space.get(), H5P_DEFAULT, &text);
#endif
    return value;
  }
  // Fixed length: read with one spare byte so the text is always terminated.
  const std::size_t size = H5Tget_size(a.type.get());
  TRELLIS_H5(H5Tset_size(memory.get(), size + 1));
  TRELLIS_H5(H5Tset_strpad(memory.get(), H5T_STR_NULLTERM));
  std::string buffer(size + 1, '\0');
  TRELLIS_H5(H5Aread(a.attribute.get(), memory.get(), buffer.data()));
  return std::string(buffer.c_str());
}

std::int64_t read_int_attribute(hid_t object, const char* name) {
  OpenAttribute a = open_attribute(object, name);
  if (H5Tget_class(a.type.get()) != H5T_INTEGER || a.count != 1) {
    wrong_kind(name, "one integer", a);
  }
  std::int64_t value = 0;
  TRELLIS_H5(H5Aread(a.attribute.get(), H5T_NATIVE_INT64, &value));
  return value;
}

std::vector<double> read_float_attribute(hid_t object, const char* name) {
  OpenAttribute a = open_attribute(object, name);
  const H5T_class_t kind = H5Tget_class(a.type.get());
  if ((kind != H5T_FLOAT && kind != H5T_INTEGER) || a.count < 1) {
    wrong_kind(name, "one or more numbers", a);
  }
  std::vector<double> values(static_cast<std::size_t>(a.count));
  TRELLIS_H5(H5Aread(a.attribute.get(), H5T_NATIVE_DOUBLE, values.data()));
  return values;
}

std::int64_t check_file_format(hid_t file, const char* expected_format, int max_version,
                               const std::string& hint) {
  const std::string quoted = std::string("\"") + expected_format + "\"";
  if (!has_attribute(file, "format"))
    throw InputError("attribute 'format' is missing (expected " + quoted +
                     (hint.empty() ? "" : "; " + hint) + ")");
  const std::string format = read_string_attribute(file, "format");
  if (format != expected_format)
    throw InputError("attribute 'format': expected " + quoted + ", found \"" + format + "\"" +
                     (hint.empty() ? "" : " (" + hint + ")"));
  const std::int64_t version = read_int_attribute(file, "format_version");
  if (version < 1 || version > max_version)
    throw InputError("attribute 'format_version': expected " +
                     (max_version == 1 ? std::string("1") : "1.." + std::to_string(max_version)) +
                     ", found " + std::to_string(version) + " (this build reads " +
                     std::string(expected_format) + " versions 1.." + std::to_string(max_version) +
                     ")");
  return version;
}

void write_string_attribute(hid_t object, const char* name, const std::string& value) {
  H5Type type(TRELLIS_H5(H5Tcopy(H5T_C_S1)));
  TRELLIS_H5(H5Tset_size(type.get(), H5T_VARIABLE));
  TRELLIS_H5(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  H5Attribute attribute = create_attribute(object, name, type.get(), space.get());
  const char* text = value.c_str();
  TRELLIS_H5(H5Awrite(attribute.get(), type.get(), &text));
}

void write_int_attribute(hid_t object, const char* name, std::int32_t value) {
  H5Space space(TRELLIS_H5(H5Screate(H5S_SCALAR)));
  H5Attribute attribute = create_attribute(object, name, H5T_STD_I32LE, space.get());
  TRELLIS_H5(H5Awrite(attribute.get(), H5T_NATIVE_INT32, &value));
}

void write_float_attribute(hid_t object, const char* name, const std::vector<float>& values,
                           bool scalar) {
  TRELLIS_REQUIRE(!values.empty() && (!scalar || values.size() == 1), name);
  const hsize_t count = values.size();
  H5Space space(scalar ? TRELLIS_H5(H5Screate(H5S_SCALAR))
                       : TRELLIS_H5(H5Screate_simple(1, &count, nullptr)));
  H5Attribute attribute = create_attribute(object, name, H5T_IEEE_F32LE, space.get());
  TRELLIS_H5(H5Awrite(attribute.get(), H5T_NATIVE_FLOAT, values.data()));
}

}  // namespace trellis
