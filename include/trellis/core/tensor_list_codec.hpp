// One flat byte format for lists of named tensors (name, logical shape, optionally values), to
// send them through MPI: the checkpoint files' tensor lists (names and shapes only) and the
// pipeline stages' gathered weights (with values).
//
// Record (native byte order, no padding; the bytes never leave the job):
//   [u64 name length][name bytes][u64 rank][i64 extent x rank][u64 value count][f32 x count]
// A list is its records back to back, so concatenated lists (MPI_Allgatherv, several senders)
// decode as one list in that order.
#pragma once

#include "trellis/core/shape.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace trellis {

struct HostTensor {
  std::string name;
  Shape shape;                // logical
  std::vector<float> values;  // row-major, [product of shape], or empty (names and shapes only)
};

// Appends one record.
void encode_tensor(std::string& out, const std::string& name, const Shape& shape,
                   const float* values = nullptr, std::size_t count = 0);

std::string encode_tensors(const std::vector<HostTensor>& tensors);

// Every record of `bytes`, in order. Throws Error when the bytes are truncated or malformed.
std::vector<HostTensor> decode_tensors(const std::string& bytes);

}  // namespace trellis
