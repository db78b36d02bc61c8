#include "trellis/core/shape.hpp"

#include "trellis/core/error.hpp"

#include <sstream>

namespace trellis {

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

}  // namespace trellis
