// Kernel labels without per-launch allocation. Kokkos takes a label as const std::string&,
// so a literal longer than the small-string buffer ("trellis::linear::bias_fwd") would be
// copied to the heap at every launch. TRELLIS_KERNEL_LABEL builds it once per call site.
#pragma once

#include <string>

#define TRELLIS_KERNEL_LABEL(text)                 \
  ([]() -> const std::string& {                    \
    static const std::string trellis_label_(text); \
    return trellis_label_;                         \
  }())
