// Reading and writing the small attributes of a data file (format tag, version, normalisation).
//
// Readers accept what h5py writes as well as what write_sample_file writes: any integer
// width for integers, float32 or float64 for floats, fixed-length or variable-length strings,
// scalar or 1-D arrays. A wrong kind of value throws InputError("attribute 'x': expected ...,
// found ..."); callers prefix the file name.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

bool has_attribute(hid_t object, const char* name);

std::string read_string_attribute(hid_t object, const char* name);
std::int64_t read_int_attribute(hid_t object, const char* name);           // exactly one value
std::vector<double> read_float_attribute(hid_t object, const char* name);  // 1 or more values

// The one format/version check of every trellis HDF5 file (data files, checkpoints, weights):
// root attribute `format` must be the string expected_format and `format_version` an integer
// in [1, max_version]. Throws InputError naming the attribute, the expected and the found
// value (callers prefix the file name, as for every reader here); `hint` (e.g. "convert data
// with tools/idx_to_hdf5.py") follows a missing or wrong format. Returns the version.
std::int64_t check_file_format(hid_t file, const char* expected_format, int max_version,
                               const std::string& hint = "");

// Writers store what the format documents: UTF-8 variable-length strings (as h5py does),
// int32 integers and float32 scalars / 1-D arrays.
void write_string_attribute(hid_t object, const char* name, const std::string& value);
void write_int_attribute(hid_t object, const char* name, std::int32_t value);
void write_float_attribute(hid_t object, const char* name, const std::vector<float>& values,
                           bool scalar = false);

}  // namespace trellis
