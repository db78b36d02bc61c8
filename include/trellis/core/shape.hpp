// Shape: the extents of a row-major tensor (outermost first), with the two helpers every
// layer needs to size buffers and to name shapes in error messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);  // product of the extents; 1 for []
std::string shape_string(const Shape& shape);  // "[64, 784]"

}  // namespace trellis
