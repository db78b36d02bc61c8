// ParamWindow: where the optimizer finds the parameters of a range of its update space.
// Update element i in [begin, end) updates params(i): a view that need not start at the
// parameters of element 0, so that pieces of the parameter buffer which sit apart (ZeRO-1's
// piece of every gradient bucket) are updated in place, with no packed copy of them.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <cstddef>

namespace trellis {

struct ParamWindow {
  FloatView params;  // [>= end]: only [begin, end) is read and written
  std::size_t begin = 0, end = 0;
};

}  // namespace trellis
