#include "trellis/core/log.hpp"

#include <cstdio>

namespace trellis {

void Logger::info(const std::string& message) const {
  if (rank_ != 0) return;
  std::fprintf(stdout, "%s\n", message.c_str());
  std::fflush(stdout);
}

void Logger::warn(const std::string& message) const {
  std::fprintf(stderr, "[rank %d] warning: %s\n", rank_, message.c_str());
  std::fflush(stderr);
}

void Logger::error(const std::string& message) const {
  std::fprintf(stderr, "[rank %d] error: %s\n", rank_, message.c_str());
  std::fflush(stderr);
}

}  // namespace trellis
