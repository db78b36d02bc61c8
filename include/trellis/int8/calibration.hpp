// Calibration of post-training int8 quantization: the scale of each quantized layer's input.
//
// An ActivationObserver attached to a layer (nn::Layer::set_input_observer) sees its input on
// N batches, twice: the first pass records min and max, the second fills a 2048-bin histogram
// of |x| over [0, max |x|]. The input's quantization is then chosen per tensor:
//   type         u8 (zero point 0) when the input is never negative (after a ReLU, pixels),
//                s8 symmetric otherwise (after a LayerNorm)
//   threshold T  minmax:      max |x| (PyTorch's MinMaxObserver, symmetric)
//                percentile:  the p-th percentile of |x| (p = 99.99 by default), outliers
//                             clipped (NVIDIA pytorch-quantization's percentile calibrator)
//                entropy:     the T whose clipped-and-quantized histogram has the smallest
//                             KL divergence from the original (TensorRT's entropy calibrator,
//                             Migacz 2017), over as many levels as the type has above zero,
//                             the zero bin counted as its neighbour (as pytorch-quantization)
//   scale        T / 255 (u8) or T / 127 (s8)
#pragma once

#include "trellis/core/name_table.hpp"
#include "trellis/kernels/int8.hpp"
#include "trellis/nn/layer.hpp"

#include <string>
#include <vector>

namespace trellis::int8 {

enum class CalibrationMethod { minmax, percentile, entropy };
const NameTable<CalibrationMethod>& calibration_method_names();  // "minmax", "percentile", ...
// A name of the table; ConfigError listing them otherwise.
CalibrationMethod parse_calibration_method(const std::string& name);
const char* calibration_method_name(CalibrationMethod method);

class ActivationObserver : public nn::InputObserver {
 public:
  static constexpr int kBins = 2048;

  // Pass 1: min and max; pass 2 (after start_histogram): the histogram of |x|.
  void observe(ConstMatrix rows) override;
  // Ends pass 1 with the range every rank agreed on (min over ranks, max over ranks).
  void start_histogram(float min, float max);
  float min() const { return min_; }
  float max() const { return max_; }
  // [kBins] counts over [0, range()]: summed over ranks by the caller.
  std::vector<double>& histogram() { return bins_; }
  const std::vector<double>& histogram() const { return bins_; }
  double range() const { return range_; }

  kernels::ActivationQuant choose(CalibrationMethod method, double percentile = 99.99) const;

 private:
  float min_ = 0, max_ = 0;
  bool seen_ = false, histogram_ = false;
  double range_ = 0;
  std::vector<double> bins_;
};

// The thresholds above on a histogram of |x| (bins of equal width over [0, bins * width]).
double percentile_threshold(const std::vector<double>& bins, double width, double percentile);
// levels: quantization levels above zero, plus one (128 for s8, 256 for u8).
double entropy_threshold(const std::vector<double>& bins, double width, int levels);

}  // namespace trellis::int8
