// Small host<->device helpers shared by the [optim] tests.
#pragma once

#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_copy.hpp"
#include "trellis/core/kokkos_types.hpp"

#include <cstdint>
#include <initializer_list>
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

// A decay or norm mask: one byte per element (values 0 and 1, or any byte for error tests).
template <class T>
trellis::MaskView mask_to_device(const std::vector<T>& values) {
  trellis::MaskView view("test_mask", values.size());
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = static_cast<std::uint8_t>(values[i]);
  Kokkos::deep_copy(view, host);
  return view;
}
inline trellis::MaskView mask_to_device(std::initializer_list<float> values) {
  return mask_to_device(std::vector<float>(values));
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
