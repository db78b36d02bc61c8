#include "trellis/nn/init.hpp"

#include "trellis/core/error.hpp"

#include <cmath>
#include <sstream>

namespace trellis::nn {

InitSpec InitSpec::zeros() { return InitSpec{}; }

InitSpec InitSpec::constant(double value) {
  InitSpec s;
  s.kind = Kind::constant;
  s.value = value;
  return s;
}

InitSpec InitSpec::uniform(double lo, double hi) {
  TRELLIS_REQUIRE(lo <= hi, "uniform init needs lo <= hi");
  InitSpec s;
  s.kind = Kind::uniform;
  s.lo = lo;
  s.hi = hi;
  return s;
}

InitSpec InitSpec::normal(double stddev, double mean) {
  TRELLIS_REQUIRE(stddev >= 0.0, "normal init needs stddev >= 0");
  InitSpec s;
  s.kind = Kind::normal;
  s.stddev = stddev;
  s.mean = mean;
  return s;
}

InitSpec InitSpec::kaiming_uniform(std::int64_t fan_in, double gain) {
  TRELLIS_REQUIRE(fan_in > 0, "kaiming_uniform init needs fan_in > 0");
  InitSpec s;
  s.kind = Kind::kaiming_uniform;
  s.fan_in = fan_in;
  s.gain = gain;
  return s;
}

InitSpec InitSpec::xavier_uniform(std::int64_t fan_in, std::int64_t fan_out, double gain) {
  TRELLIS_REQUIRE(fan_in + fan_out > 0, "xavier_uniform init needs fan_in + fan_out > 0");
  InitSpec s;
  s.kind = Kind::xavier_uniform;
  s.fan_in = fan_in;
  s.fan_out = fan_out;
  s.gain = gain;
  return s;
}

double InitSpec::uniform_bound() const {
  switch (kind) {
    case Kind::kaiming_uniform:
      return gain * std::sqrt(3.0 / static_cast<double>(fan_in));
    case Kind::xavier_uniform:
      return gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    default:
      throw Error("uniform_bound() of a non-fan-based init: " + describe());
  }
}

std::string InitSpec::describe() const {
  std::ostringstream out;
  switch (kind) {
    case Kind::zeros:
      out << "zeros";
      break;
    case Kind::constant:
      out << "constant(" << value << ")";
      break;
    case Kind::uniform:
      out << "uniform(" << lo << ", " << hi << ")";
      break;
    case Kind::normal:
      out << "normal(mean=" << mean << ", std=" << stddev << ")";
      break;
    case Kind::kaiming_uniform:
      out << "kaiming_uniform(fan_in=" << fan_in << ", gain=" << gain << ")";
      break;
    case Kind::xavier_uniform:
      out << "xavier_uniform(fan_in=" << fan_in << ", fan_out=" << fan_out << ", gain=" << gain
          << ")";
      break;
  }
  return out.str();
}

}  // namespace trellis::nn
