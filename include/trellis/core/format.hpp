// printf-style formatting into a std::string, for log lines and messages (not the hot path).
// The format attribute lets the compiler check the arguments against the format.
#pragma once

#include <string>

namespace trellis {

std::string format_text(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// "512 B", "3.5 KiB", "412 MiB", "1.21 GiB": three significant digits, binary units.
std::string format_bytes(double bytes);

}  // namespace trellis
