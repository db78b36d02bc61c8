#include "trellis/int8/calibration.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/name_table.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace trellis::int8 {

const NameTable<CalibrationMethod>& calibration_method_names() {
  static const NameTable<CalibrationMethod> names{{"minmax", CalibrationMethod::minmax},
                                                  {"percentile", CalibrationMethod::percentile},
                                                  {"entropy", CalibrationMethod::entropy}};
  return names;
}

CalibrationMethod parse_calibration_method(const std::string& name) {
  CalibrationMethod method{};
  if (!find_name(calibration_method_names(), name, method))
    throw ConfigError("calibration method '" + name + "': expected one of " +
                      name_list(calibration_method_names()));
  return method;
}

const char* calibration_method_name(CalibrationMethod method) {
  return name_in(calibration_method_names(), method);
}

void ActivationObserver::observe(ConstMatrix rows) {
  // Calibration runs a few batches outside training: a host copy per call is fine here.
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), kernels::flat(rows));
  const float* v = host.data();
  const std::size_t n = host.extent(0);
  if (!histogram_) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!seen_) min_ = max_ = v[i], seen_ = true;
      min_ = std::min(min_, v[i]);
      max_ = std::max(max_, v[i]);
    }
    return;
  }
  if (range_ <= 0) return;
  const double per_bin = kBins / range_;
  for (std::size_t i = 0; i < n; ++i) {
    const auto bin = static_cast<std::size_t>(std::fabs(static_cast<double>(v[i])) * per_bin);
    bins_[std::min<std::size_t>(bin, kBins - 1)] += 1.0;
  }
}

void ActivationObserver::start_histogram(float min, float max) {
  min_ = min, max_ = max, seen_ = true;
  histogram_ = true;
  range_ = std::max(std::fabs(static_cast<double>(min)), std::fabs(static_cast<double>(max)));
  bins_.assign(kBins, 0.0);
}

kernels::ActivationQuant ActivationObserver::choose(CalibrationMethod method,
                                                    double percentile) const {
  kernels::ActivationQuant q;
  q.type = min_ >= 0.0f ? kernels::QuantType::u8 : kernels::QuantType::s8;
  q.zero_point = 0;
  const double width = range_ / kBins;
  double threshold =
      std::max(std::fabs(static_cast<double>(min_)), std::fabs(static_cast<double>(max_)));
  if (method != CalibrationMethod::minmax) {
    if (!histogram_)
      throw Error("calibration: " + std::string(calibration_method_name(method)) +
                  " needs the histogram pass");
    threshold = method == CalibrationMethod::percentile
                    ? percentile_threshold(bins_, width, percentile)
                    : entropy_threshold(bins_, width, q.qmax() + 1);
  }
  q.scale = threshold > 0 ? static_cast<float>(threshold / q.qmax()) : 1.0f;
  return q;
}

double percentile_threshold(const std::vector<double>& bins, double width, double percentile) {
  const double total = std::accumulate(bins.begin(), bins.end(), 0.0);
  if (total <= 0) return 0;
  const double wanted = total * percentile / 100.0;
  double seen = 0;
  for (std::size_t i = 0; i < bins.size(); ++i) {
    seen += bins[i];
    if (seen >= wanted) return static_cast<double>(i + 1) * width;
  }
  return static_cast<double>(bins.size()) * width;
}

namespace {

// KL(p || q) of two unnormalised distributions over the same bins; q gets a small share of
// mass where p has some and q none (MXNet's _smooth_distribution), so the sum is finite.
double kl_divergence(std::vector<double> p, std::vector<double> q) {
  const double eps = 1e-4;
  for (std::vector<double>* d : {&p, &q}) {
    std::size_t zeros = 0;
    for (const double v : *d) zeros += v == 0 ? 1 : 0;
    const std::size_t nonzeros = d->size() - zeros;
    if (nonzeros == 0) return std::numeric_limits<double>::infinity();
    const double take = eps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
    for (double& v : *d) v = v == 0 ? eps : v - take;
  }
  const double sp = std::accumulate(p.begin(), p.end(), 0.0);
  const double sq = std::accumulate(q.begin(), q.end(), 0.0);
  double kl = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double a = p[i] / sp, b = q[i] / sq;
    if (a > 0) kl += a * std::log(a / b);
  }
  return kl;
}

}  // namespace

double entropy_threshold(const std::vector<double>& histogram, double width, int levels) {
  const std::size_t n = histogram.size(), l = static_cast<std::size_t>(levels);
  if (n <= l) return static_cast<double>(n) * width;
  // The zero bin counts as its neighbour (NVIDIA pytorch-quantization's entropy calibrator):
  // after a ReLU it holds most of the mass, all of it exactly representable, and would
  // otherwise pull the threshold down until the tail is clipped hard.
  std::vector<double> bins = histogram;
  bins[0] = bins[1];
  double best_kl = std::numeric_limits<double>::infinity();
  std::size_t best = n;
  std::vector<double> p, q;
  for (std::size_t i = l; i <= n; ++i) {
    // p: the first i bins, everything beyond clipped into the last of them.
    p.assign(bins.begin(), bins.begin() + static_cast<std::ptrdiff_t>(i));
    p[i - 1] += std::accumulate(bins.begin() + static_cast<std::ptrdiff_t>(i), bins.end(), 0.0);
    if (std::accumulate(p.begin(), p.end(), 0.0) <= 0) continue;
    // q: the first i bins merged into l levels, each level's mass spread back evenly over
    // the bins of it that were not empty.
    q.assign(i, 0.0);
    const std::size_t merged = i / l;
    for (std::size_t j = 0; j < l; ++j) {
      const std::size_t begin = j * merged, end = j + 1 == l ? i : begin + merged;
      double mass = 0;
      std::size_t nonzero = 0;
      for (std::size_t b = begin; b < end; ++b) {
        mass += bins[b];
        nonzero += bins[b] != 0 ? 1 : 0;
      }
      if (nonzero == 0) continue;
      for (std::size_t b = begin; b < end; ++b)
        if (bins[b] != 0) q[b] = mass / static_cast<double>(nonzero);
    }
    const double kl = kl_divergence(p, q);
    if (kl < best_kl) best_kl = kl, best = i;
  }
  return static_cast<double>(best) * width;
}

}  // namespace trellis::int8
