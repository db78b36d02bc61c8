#include "trellis/core/error.hpp"

#include <cstring>

namespace trellis {

void throw_call_failure(const char* api, const char* call, const std::string& detail,
                        const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  std::string message = std::string(api) + " call `" + call + "` failed at " +
                        (base ? base + 1 : file) + ":" + std::to_string(line);
  if (!detail.empty()) message += ": " + detail;
  throw Error(message);
}

}  // namespace trellis
