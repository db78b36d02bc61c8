#include "trellis/train/metrics_log.hpp"

#include "trellis/core/error.hpp"

#include <cerrno>
#include <cstring>

namespace trellis {

MetricsLog::MetricsLog(const std::string& path, bool enabled) : path_(path) {
  if (!enabled) return;
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    throw Error("cannot open metrics file '" + path + "' for writing: " + std::strerror(errno));
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
