// Small host<->device helpers shared by the [optim] tests.
#pragma once

#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_copy.hpp"
#include "trellis/core/kokkos_types.hpp"

#include <string>
#include <vector>

namespace optim_test {

inline trellis::FloatView to_device(const std::vector<float>& values,
                                    const std::string& label = "test") {
  trellis::FloatView view(label, values.size());
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(view, host);
  return view;
}

template <class View>
std::vector<float> to_host(const View& view) {
  return trellis::to_host_vector(view);
}

// The message of the ConfigError f() throws, or "" when it throws none. Portable across
// Catch2 v2 and v3, whose string matchers differ.
template <class F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (const trellis::ConfigError& e) {
    return e.what();
  }
  return "";
}

// Element-wise comparison; the relative tolerance leaves room for FMA contraction on GPUs.
inline void check_close(const std::vector<float>& actual, const std::vector<float>& expected,
                        double rel = 1e-5) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    CHECK(actual[i] == Approx(expected[i]).epsilon(rel).margin(1e-7));
  }
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace optim_test
