#include "trellis/core/tensor.hpp"

#include "trellis/core/error.hpp"

#include <sstream>

namespace trellis {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
  }
  return "unknown";
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto extent : shape) {
    TRELLIS_REQUIRE(extent >= 0, "negative extent in shape " + shape_string(shape));
    n *= extent;
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

Tensor make_tensor(const std::string& label, const Shape& shape, DType dtype) {
  TRELLIS_REQUIRE(dtype == DType::f32, "only f32 storage is implemented so far");
  Tensor t;
  t.shape = shape;
  t.dtype = dtype;
  t.data = FloatView(label, static_cast<std::size_t>(shape_numel(shape)));
  return t;
}

}  // namespace trellis
