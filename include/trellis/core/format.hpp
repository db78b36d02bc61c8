// printf-style formatting into a std::string, for log lines and messages (not the hot path).
// The format attribute lets the compiler check the arguments against the format.
#pragma once

#include <string>

namespace trellis {

std::string format_text(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace trellis
