// How a parameter is initialised. Uniform and normal draws come from the counter-based RNG:
// element e of parameter `name` uses draw (seed, stream_from_name(name), e), so a parameter's
// initial values are a function of (seed, name, element) alone. They do not depend on the
// registration order, on the number of ranks, or on how the tensor is later sharded (a shard
// starting at element e0 draws from e0 on, see kernels::fill_uniform's first_index).
#pragma once

#include <cstdint>
#include <string>

namespace trellis::nn {

struct InitSpec {
  enum class Kind { zeros, constant, uniform, normal, kaiming_uniform, xavier_uniform };

  Kind kind = Kind::zeros;
  double value = 0.0;                    // constant: the value
  double lo = 0.0, hi = 0.0;             // uniform: U[lo, hi)
  double mean = 0.0, stddev = 0.0;       // normal: N(mean, std^2)
  std::int64_t fan_in = 0, fan_out = 0;  // kaiming / xavier
  double gain = 1.0;                     // kaiming / xavier

  static InitSpec zeros();
  static InitSpec constant(double value);
  static InitSpec uniform(double lo, double hi);
  static InitSpec normal(double stddev, double mean = 0.0);
  // PyTorch's kaiming_uniform_: U(-b, b), b = gain * sqrt(3 / fan_in). The default gain
  // sqrt(2) is PyTorch's (a = 0, leaky_relu); nn.Linear uses gain = 1/sqrt(3), i.e. b =
  // 1/sqrt(fan_in).
  static InitSpec kaiming_uniform(std::int64_t fan_in, double gain = 1.4142135623730951);
  // Glorot/Xavier uniform: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
  static InitSpec xavier_uniform(std::int64_t fan_in, std::int64_t fan_out, double gain = 1.0);

  // Half-width b of the uniform kinds' interval (kaiming, xavier); throws for other kinds.
  double uniform_bound() const;
  // "kaiming_uniform(fan_in=784, gain=0.577)" for logs and error messages.
  std::string describe() const;
};

}  // namespace trellis::nn
