#include "trellis/nn/quantization.hpp"

#include "trellis/core/error.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/tied_head.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace trellis::nn {

CalibrationMethod parse_calibration_method(const std::string& name) {
  if (name == "minmax") return CalibrationMethod::minmax;
  if (name == "percentile") return CalibrationMethod::percentile;
  if (name == "entropy") return CalibrationMethod::entropy;
  throw ConfigError("calibration method '" + name + "': expected minmax, percentile or entropy");
}

const char* calibration_method_name(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::minmax:
      return "minmax";
    case CalibrationMethod::percentile:
      return "percentile";
    case CalibrationMethod::entropy:
      return "entropy";
  }
  return "?";
}

void ActivationObserver::observe(kernels::ConstVector x) {
  // Calibration runs a few batches outside training: a host copy per call is fine here.
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), x);
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

kernels::ByteView int8_input_buffer(const Layer& layer, const kernels::Int8Linear* kernel) {
  if (kernel == nullptr) return {};
  if (kernel->in_features() != layer.in_features() ||
      kernel->out_features() != layer.out_features())
    throw Error("layer \"" + layer.name() + "\": int8 kernel of another shape");
  return kernels::ByteView(
      "trellis::nn::" + layer.name() + ".xq",
      static_cast<std::size_t>(layer.capacity()) * static_cast<std::size_t>(layer.in_features()));
}

std::vector<Layer*> quantizable_layers(Model& model) {
  std::vector<Layer*> layers;
  model.for_each_layer([&](Layer& layer) {
    if (dynamic_cast<Linear*>(&layer) != nullptr || dynamic_cast<Conv2d*>(&layer) != nullptr ||
        dynamic_cast<TiedHead*>(&layer) != nullptr)
      layers.push_back(&layer);
  });
  return layers;
}

void set_input_observer(Layer& layer, ActivationObserver* observer) {
  if (auto* linear = dynamic_cast<Linear*>(&layer)) linear->set_input_observer(observer);
  if (auto* conv = dynamic_cast<Conv2d*>(&layer)) conv->set_input_observer(observer);
  if (auto* head = dynamic_cast<TiedHead*>(&layer)) head->set_input_observer(observer);
}

namespace {

std::vector<float> host_values(kernels::ConstVector x) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), x);
  return std::vector<float>(host.data(), host.data() + host.extent(0));
}

FloatView device_values(const std::string& label, const std::vector<float>& values) {
  FloatView v(label, values.size());
  const auto host = Kokkos::create_mirror_view(HostSpace(), v);
  std::copy(values.begin(), values.end(), host.data());
  Kokkos::deep_copy(v, host);
  return v;
}

// Symmetric per-row quantization of w [rows, numel / rows] into q.
void quantize_rows(const std::vector<float>& w, std::size_t rows, Int8Layer& q) {
  const std::size_t cols = w.size() / rows;
  const FloatView weights = device_values("trellis::quantize::w", w);
  kernels::Int8View bytes("trellis::quantize::weight", w.size());
  FloatView scales("trellis::quantize::scales", rows);
  kernels::quantize_weights(weights, rows, cols, bytes, scales);
  const auto b = Kokkos::create_mirror_view_and_copy(HostSpace(), bytes);
  q.weight.assign(b.data(), b.data() + b.extent(0));
  q.weight_scale = host_values(scales);
}

}  // namespace

Int8Layer quantize_layer(const Layer& layer, const ParameterStore& store,
                         const kernels::ActivationQuant& input, const BatchNorm2d* norm) {
  Int8Layer q;
  q.name = layer.name();
  q.input = input;
  if (const auto* linear = dynamic_cast<const Linear*>(&layer)) {
    if (norm != nullptr) throw Error("quantize: a BatchNorm cannot fold into Linear " + q.name);
    q.weight_shape = {linear->out_features(), linear->in_features()};
    quantize_rows(host_values(store.param_vector(linear->weight_index())),
                  static_cast<std::size_t>(linear->out_features()), q);
    return q;
  }
  if (const auto* head = dynamic_cast<const TiedHead*>(&layer)) {
    if (norm != nullptr) throw Error("quantize: a BatchNorm cannot fold into head " + q.name);
    q.weight_shape = {head->out_features(), head->in_features()};
    quantize_rows(host_values(store.param_vector(head->weight_index())),
                  static_cast<std::size_t>(head->out_features()), q);
    return q;
  }
  const auto* conv = dynamic_cast<const Conv2d*>(&layer);
  if (conv == nullptr)
    throw Error("quantize: layer " + q.name + " is neither Linear, Conv2d nor a tied head");
  const kernels::ConvGeometry& g = conv->geometry();
  const auto out = static_cast<std::size_t>(conv->out_channels());
  q.weight_shape = {conv->out_channels(), g.channels, g.kernel, g.kernel};
  std::vector<float> w = host_values(store.param_vector(conv->weight_index()));
  q.bias = conv->bias_index() ? host_values(store.param_vector(*conv->bias_index()))
                              : std::vector<float>(out, 0.0f);
  if (norm != nullptr) {
    if (static_cast<std::size_t>(norm->channels()) != out)
      throw Error("quantize: BatchNorm " + norm->name() + " does not fit convolution " + q.name);
    const std::vector<float> gamma = host_values(store.param_vector(norm->weight_index()));
    const std::vector<float> beta = host_values(store.param_vector(norm->bias_index()));
    const std::vector<float> mean = host_values(norm->running_mean());
    const std::vector<float> var = host_values(norm->running_var());
    const std::size_t per_channel = w.size() / out;
    for (std::size_t o = 0; o < out; ++o) {
      const double factor =
          static_cast<double>(gamma[o]) /
          std::sqrt(static_cast<double>(var[o]) + static_cast<double>(norm->eps()));
      for (std::size_t e = 0; e < per_channel; ++e)
        w[o * per_channel + e] = static_cast<float>(w[o * per_channel + e] * factor);
      q.bias[o] = static_cast<float>(beta[o] + (q.bias[o] - static_cast<double>(mean[o])) * factor);
    }
    q.folded_norm = norm->name();
  }
  quantize_rows(w, out, q);
  return q;
}

void attach_int8(Model& model, const ParameterStore& store, const std::vector<Int8Layer>& layers,
                 kernels::Int8Backend backend, bool fuse) {
  const std::vector<Layer*> candidates = quantizable_layers(model);
  std::vector<BatchNorm2d*> norms;
  model.for_each_layer([&](Layer& layer) {
    if (auto* norm = dynamic_cast<BatchNorm2d*>(&layer)) norms.push_back(norm);
  });
  for (const Int8Layer& q : layers) {
    const auto it = std::find_if(candidates.begin(), candidates.end(),
                                 [&](const Layer* l) { return l->name() == q.name; });
    if (it == candidates.end())
      throw Error("int8 layer '" + q.name +
                  "': the model has no Linear, Conv2d or head of that name");
    std::int64_t numel = 1;
    for (const std::int64_t d : q.weight_shape) numel *= d;
    const auto out = static_cast<std::size_t>(q.out());
    if (q.weight.size() != static_cast<std::size_t>(numel) || q.weight_scale.size() != out ||
        (!q.bias.empty() && q.bias.size() != out))
      throw Error("int8 layer '" + q.name + "': weights, scales and bias do not fit " +
                  shape_string(q.weight_shape));
    kernels::Int8View weight("trellis::int8::weight", q.weight.size());
    {
      const auto w = Kokkos::create_mirror_view(HostSpace(), weight);
      std::copy(q.weight.begin(), q.weight.end(), w.data());
      Kokkos::deep_copy(weight, w);
    }
    const FloatView scales = device_values("trellis::int8::scales", q.weight_scale);
    if (auto* linear = dynamic_cast<Linear*>(*it)) {
      if (q.is_conv() || linear->out_features() != q.weight_shape[0] ||
          linear->in_features() != q.weight_shape[1])
        throw Error("int8 layer '" + q.name + "': " + shape_string(q.weight_shape) +
                    " for a Linear of [" + std::to_string(linear->out_features()) + ", " +
                    std::to_string(linear->in_features()) + "]");
      linear->set_int8(std::make_unique<kernels::Int8Linear>(
          q.name, linear->in_features(), linear->out_features(), weight, scales,
          store.param_vector(linear->bias_index()), q.input, linear->activation(), backend));
      continue;
    }
    if (auto* head = dynamic_cast<TiedHead*>(*it)) {
      if (q.is_conv() || head->out_features() != q.weight_shape[0] ||
          head->in_features() != q.weight_shape[1] || !q.bias.empty())
        throw Error("int8 layer '" + q.name + "': " + shape_string(q.weight_shape) +
                    " for a head of [" + std::to_string(head->out_features()) + ", " +
                    std::to_string(head->in_features()) + "] without bias");
      head->set_int8(std::make_unique<kernels::Int8Linear>(
          q.name, head->in_features(), head->out_features(), weight, scales,
          device_values("trellis::int8::bias", std::vector<float>(out, 0.0f)), q.input,
          kernels::Activation::none, backend));
      continue;
    }
    auto* conv = dynamic_cast<Conv2d*>(*it);
    const kernels::ConvGeometry& g = conv->geometry();
    if (q.weight_shape != Shape{conv->out_channels(), g.channels, g.kernel, g.kernel})
      throw Error("int8 layer '" + q.name + "': " + shape_string(q.weight_shape) +
                  " for a convolution of " + std::to_string(conv->out_channels()) +
                  " channels over " + g.describe());
    const FloatView bias =
        device_values("trellis::int8::bias",
                      !q.bias.empty()      ? q.bias
                      : conv->bias_index() ? host_values(store.param_vector(*conv->bias_index()))
                                           : std::vector<float>(out, 0.0f));
    conv->set_int8(std::make_unique<kernels::Int8Conv2d>(
        q.name, g, conv->out_channels(), weight, scales, bias, q.input, kernels::Activation::none,
        conv->capacity(), backend));
    if (!q.folded_norm.empty()) {
      const auto norm = std::find_if(norms.begin(), norms.end(), [&](const BatchNorm2d* n) {
        return n->name() == q.folded_norm;
      });
      if (norm == norms.end())
        throw Error("int8 layer '" + q.name + "': its folded BatchNorm '" + q.folded_norm +
                    "' is not in the model");
      (*norm)->set_folded(true);
    }
  }
  if (fuse) model.int8_attached();
}

}  // namespace trellis::nn
