#include "trellis/core/format.hpp"

#include <cstdarg>
#include <cstdio>

namespace trellis {

std::string format_text(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list again;
  va_copy(again, args);
  const int size = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string text;
  if (size > 0) {
    text.resize(static_cast<std::size_t>(size) + 1);
    std::vsnprintf(text.data(), text.size(), fmt, again);
    text.pop_back();
  }
  va_end(again);
  return text;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && (bytes >= 1024.0 || bytes <= -1024.0)) bytes /= 1024.0, ++unit;
  return unit == 0 ? format_text("%.0f B", bytes) : format_text("%.3g %s", bytes, kUnits[unit]);
}

}  // namespace trellis
