// HDF5 essentials for the data layer: TRELLIS_H5(call), which checks every HDF5 return code,
// and move-only RAII handles that close each kind of HDF5 object with its own H5?close.
//
// HDF5's habit of printing its error stack to stderr is switched off (hdf5_quiet()); instead
// the innermost message of the stack (where the library detected the problem, e.g.
// "unable to open file: name = 'x.h5', errno = 2 ...") goes into the exception text.
//
// Not thread-safe: Debian's and most cluster HDF5 builds are not built thread-safe, so all
// HDF5 calls of a process must come from one thread at a time. Today that is the main thread
// (reads happen inline in the training loop); a future background loader must own them all.
#pragma once

#include "trellis/core/error.hpp"

#include <hdf5.h>

#include <string>
#include <utility>

namespace trellis {

// Switches off HDF5's automatic error printing (idempotent, cheap). Every entry point of the
// data layer that talks to HDF5 calls it first.
void hdf5_quiet();

// HDF5 files still open in this process. main() asks before MPI_Finalize: HDF5 closes what is
// left from an MPI attribute callback during MPI_Finalize, and a file whose close already
// failed once crashes it there (SIGSEGV in H5F__close_cb), so main ends such a job otherwise.
long hdf5_open_files();

// The innermost message on HDF5's current error stack ("" when empty); clears the stack.
std::string hdf5_error_detail();

// "uint8", "int32", "float32", "float64", "string", "compound", ... for error messages.
std::string hdf5_type_name(hid_t type);

// Negative return values mean failure for every HDF5 call (herr_t, hid_t, htri_t, hssize_t).
template <class T>
inline T hdf5_check(T result, const char* call, const char* file, int line) {
  if (result < 0) throw_call_failure("HDF5", call, hdf5_error_detail(), file, line);
  return result;
}

}  // namespace trellis

// Runs an HDF5 call, throws trellis::Error naming it when the result is negative, and
// otherwise yields the result: `H5Dataset d(TRELLIS_H5(H5Dopen2(file, "/x", H5P_DEFAULT)));`
#define TRELLIS_H5(call) ::trellis::hdf5_check((call), #call, __FILE__, __LINE__)

namespace trellis {

// Owns one HDF5 identifier and closes it with Close. Close errors in the destructor are
// ignored on purpose: a destructor may run during unwinding from another HDF5 failure.
template <herr_t (*Close)(hid_t)>
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  ~H5Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() noexcept {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Declare a file handle before the handles of objects inside it: members are destroyed in
// reverse order, and the MPI-IO driver refuses to close a file that still has open objects.
using H5File = H5Handle<H5Fclose>;
using H5Group = H5Handle<H5Gclose>;
using H5Dataset = H5Handle<H5Dclose>;
using H5Space = H5Handle<H5Sclose>;
using H5Plist = H5Handle<H5Pclose>;
using H5Attribute = H5Handle<H5Aclose>;
using H5Type =
    H5Handle<H5Tclose>;  // only for types we own (H5Dget_type, H5Tcopy), never H5T_NATIVE_*

}  // namespace trellis
