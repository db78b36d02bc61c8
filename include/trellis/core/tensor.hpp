// Tensor: a flat Kokkos View plus a logical shape and an element type.
//
// Storage is always row-major and contiguous. Tensors are built at model-build time; the
// training step only reads their views, it never constructs new ones.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

// fp32 is the compute type today; bf16/fp16 are storage types for mixed precision.
enum class DType { f32, bf16, f16 };

const char* dtype_name(DType dtype);

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[64, 784]"

struct Tensor {
  FloatView data;  // [numel(shape)], row-major
  Shape shape;
  DType dtype = DType::f32;

  std::int64_t numel() const { return shape_numel(shape); }
  std::int64_t dim(std::size_t axis) const { return shape.at(axis); }
};

// Allocates a zero-filled tensor with a Kokkos label such as "trellis::mlp::fc1.out".
Tensor make_tensor(const std::string& label, const Shape& shape, DType dtype = DType::f32);

}  // namespace trellis
