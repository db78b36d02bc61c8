#include "trellis/train/metrics_log.hpp"

#include "trellis/core/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace trellis {

namespace {

// The "step" of a line JsonLine wrote ({"step": N, ...}), or -1.
std::int64_t step_of(const std::string& line) {
  const std::string key = "\"step\": ";
  const auto at = line.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(line.c_str() + at + key.size(), nullptr, 10);
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool enabled, std::int64_t resumed_step)
    : path_(path) {
  if (!enabled) return;
  std::vector<std::string> kept;
  if (resumed_step >= 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (step_of(line) <= resumed_step) kept.push_back(line);
  }
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    throw Error("cannot open metrics file '" + path + "' for writing: " + std::strerror(errno));
  for (const std::string& line : kept) std::fprintf(file_, "%s\n", line.c_str());
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const JsonLine& line) {
  if (!file_) return;
  const std::string text = line.str() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    throw Error("cannot write metrics file '" + path_ + "': " + std::strerror(errno));
}

}  // namespace trellis
