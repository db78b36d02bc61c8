// Helpers shared by the kernels / nn unit tests: host <-> device copies that work on any Kokkos
// backend, deterministic test data, and a central-difference gradient check.
#pragma once

#include "catch.hpp"

#include "trellis/core/host_copy.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trellis::test {

inline std::vector<float> random_values(std::size_t count, std::uint64_t stream, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = lo + (hi - lo) * random_uniform(12345, stream, i);
  return v;
}

inline FloatView to_device(const std::string& label, const std::vector<float>& host) {
  FloatView v(label, host.size());
  Kokkos::View<const float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(host.data(),
                                                                                   host.size());
  Kokkos::deep_copy(v, h);
  return v;
}

inline IntView labels_to_device(const std::vector<std::int32_t>& host) {
  IntView v("labels", host.size());
  Kokkos::View<const std::int32_t*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(
      host.data(), host.size());
  Kokkos::deep_copy(v, h);
  return v;
}

// Copies any contiguous float view (1-D or row-major 2-D) to a host vector.
template <class View>
std::vector<float> to_host(const View& v) {
  return trellis::to_host_vector(v);
}

inline float get(const FloatView& v, std::size_t i) {
  float x = 0.0f;
  Kokkos::View<float, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(&x);
  Kokkos::deep_copy(h, Kokkos::subview(v, i));
  return x;
}

inline void set(const FloatView& v, std::size_t i, float x) {
  Kokkos::deep_copy(Kokkos::subview(v, i), x);
}

// |a - b| <= abs_tol + rel_tol * max(|a|, |b|)
inline bool close(double a, double b, double rel_tol, double abs_tol) {
  return std::fabs(a - b) <= abs_tol + rel_tol * std::fmax(std::fabs(a), std::fabs(b));
}

// Central difference (loss(x_i + eps) - loss(x_i - eps)) / 2 eps for every element i of
// `values`, compared against analytic[i]. loss() must recompute everything from `values`.
inline void check_gradient(const std::string& what, const FloatView& values,
                           const std::vector<float>& analytic, const std::function<double()>& loss,
                           float eps = 1e-3f, double rel_tol = 1e-2, double abs_tol = 1e-3) {
  REQUIRE(analytic.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float x = get(values, i);
    set(values, i, x + eps);
    const double up = loss();
    set(values, i, x - eps);
    const double down = loss();
    set(values, i, x);
    const double numeric = (up - down) / (2.0 * static_cast<double>(eps));
    INFO(what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric);
    CHECK(close(analytic[i], numeric, rel_tol, abs_tol));
  }
}

// sum_i w[i] * y[i] in double: the scalar whose gradient w.r.t. y is w.
template <class View>
double weighted_sum(const View& y, const std::vector<float>& w) {
  const std::vector<float> h = to_host(y);
  REQUIRE(h.size() == w.size());
  double s = 0.0;
  for (std::size_t i = 0; i < h.size(); ++i) s += static_cast<double>(w[i]) * h[i];
  return s;
}

// Finite-difference check of one layer on n rows of x_host ([n, in_features]) for the scalar
// L = sum(w * output) with fixed random w: dL/dx and dL/dparam for every parameter in `store`.
// `check(what, values, analytic, loss)` compares one tensor (check_gradient, or a variant).
template <class Check>
void gradcheck_layer_with(nn::Layer& layer, nn::ParameterStore& store, int n,
                          const std::vector<float>& x_host, const nn::StepContext& ctx,
                          Check check) {
  const int in = layer.in_features(), out = layer.out_features();
  REQUIRE(x_host.size() == static_cast<std::size_t>(n * in));
  FloatView x = to_device("x", x_host);
  const std::vector<float> w = random_values(static_cast<std::size_t>(n * out), 77);
  auto loss = [&] {
    layer.forward(as_matrix(x, n, in), n, ctx);
    return weighted_sum(kernels::first_rows(layer.output(), n), w);
  };
  store.zero_grads();
  loss();
  FloatView dy = to_device("dy", w);
  layer.backward(as_matrix(dy, n, out), n);
  const std::vector<float> dx = to_host(kernels::first_rows(layer.input_grad(), n));
  std::vector<std::vector<float>> dparams;
  for (std::size_t i = 0; i < store.size(); ++i) dparams.push_back(to_host(store.grad(i)));

  check(layer.name() + ".input", x, dx, loss);
  for (std::size_t i = 0; i < store.size(); ++i)
    check(store.info(i).name, store.param(i), dparams[i], loss);
}

inline void gradcheck_layer(nn::Layer& layer, nn::ParameterStore& store, int n,
                            const std::vector<float>& x_host, const nn::StepContext& ctx,
                            float eps = 1e-3f) {
  gradcheck_layer_with(
      layer, store, n, x_host, ctx,
      [eps](const std::string& what, const FloatView& values, const std::vector<float>& analytic,
            const std::function<double()>& loss) {
        check_gradient(what, values, analytic, loss, eps);
      });
}

}  // namespace trellis::test
