// One safetensors file (Hugging Face's tensor format), read and written without Python:
//
//   bytes [0, 8)        N, the header's length: uint64, little-endian
//   bytes [8, 8 + N)    the header, UTF-8 JSON (padded with spaces to a multiple of 8 bytes):
//                       {"<tensor name>": {"dtype": "F32", "shape": [rows, cols],
//                                          "data_offsets": [begin, end]}, ...,
//                        "__metadata__": {"format": "pt"}}       (metadata: string -> string)
//   bytes [8 + N, ...)  the data section; a tensor's bytes are [begin, end) relative to its
//                       start, row-major, little-endian, end - begin = numel x dtype size
//
// The reader checks the whole header before any tensor is read (a file is input: every
// problem is an InputError naming the file, and the tensor where there is one): N within the
// file, the header a JSON object, each tensor's dtype one of safetensors' names, its shape
// non-negative, its data_offsets inside the data section, of the size its shape and dtype
// give, and no two tensors overlapping. Tensors are converted to float32 as they are read:
// F32, F16 and BF16 (core/precision.hpp's round-to-nearest-even conversions); the other
// dtypes (integers, F64, F8) are known, so their headers validate, but not read.
// Little-endian hosts only, as every target of Trellis.
#pragma once

#include "trellis/core/precision.hpp"
#include "trellis/core/shape.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trellis {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  Shape shape;
  std::uint64_t begin = 0, end = 0;  // data_offsets, relative to the data section
};

class SafetensorsReader {
 public:
  // Reads and validates the header; InputError naming the file (and tensor) otherwise.
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return path_; }
  // Every tensor, in data order.
  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }
  const SafetensorsEntry* find(const std::string& name) const;  // null when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor `name` as float32, row-major [numel]; InputError naming the file and tensor when it
  // is absent, of an unsupported dtype, or the file cannot be read.
  std::vector<float> read(const std::string& name) const;

 private:
  std::string path_;
  std::uint64_t data_start_ = 0;  // 8 + N
  std::vector<SafetensorsEntry> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: float32 values [numel(shape)] that the caller keeps alive.
struct SafetensorsTensor {
  std::string name;
  Shape shape;
  const float* values = nullptr;
};

// Writes `tensors` (in this order in the data section) as `dtype` (F32, BF16 or F16, rounded
// to nearest even) with the given metadata, to `path` directly (the caller publishes a
// folder of them at once). Error naming the file when it cannot be written.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       Precision dtype, const std::map<std::string, std::string>& metadata);

// "F32" | "BF16" | "F16": the safetensors name of a Trellis precision.
const char* safetensors_dtype(Precision p);
// Bytes per element of a safetensors dtype name; 0 for a name safetensors does not have.
std::size_t safetensors_dtype_bytes(const std::string& dtype);

}  // namespace trellis
