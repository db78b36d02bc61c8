// Shared by the model registrations (private to train/model/).
#pragma once

#include "trellis/core/error.hpp"

#include <cstdint>
#include <limits>
#include <string>

namespace trellis {

// A size from the data or the batch as the int a model spec holds; ConfigError when it does not
// fit one model call.
inline int spec_int(std::int64_t value, const char* what) {
  if (value < 0 || value > std::numeric_limits<int>::max())
    throw ConfigError(std::string(what) + " = " + std::to_string(value) +
                      " does not fit one model call");
  return static_cast<int>(value);
}

}  // namespace trellis
