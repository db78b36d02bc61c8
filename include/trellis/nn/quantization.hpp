// Post-training int8 quantization of a model's Linear layers (trellis quantize, eval and
// generate of an int8 model; kernels/int8.hpp has the arithmetic).
//
// Calibration: an ActivationObserver attached to a Linear sees its input on N batches, twice:
// the first pass records min and max, the second fills a 2048-bin histogram of |x| over
// [0, max |x|]. The input's quantization is then chosen per tensor:
//   type         u8 (zero point 0) when the input is never negative (after a ReLU, pixels),
//                s8 symmetric otherwise (after a LayerNorm)
//   threshold T  minmax:      max |x| (PyTorch's MinMaxObserver, symmetric)
//                percentile:  the p-th percentile of |x| (p = 99.99 by default), outliers
//                             clipped (NVIDIA pytorch-quantization's percentile calibrator)
//                entropy:     the T whose clipped-and-quantized histogram has the smallest
//                             KL divergence from the original (TensorRT's entropy calibrator,
//                             Migacz 2017), over as many levels as the type has above zero
//   scale        T / 255 (u8) or T / 127 (s8)
// Weights are symmetric per output row (kernels::quantize_weights): no calibration.
//
// Int8Layer is what the int8 weights file holds for one Linear; attach_int8() makes a built
// model's Linears run int8 (LayerNorm, softmax, embeddings, residual adds stay fp32).
#pragma once

#include "trellis/kernels/int8.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::nn {

class Linear;

enum class CalibrationMethod { minmax, percentile, entropy };
// "minmax" | "percentile" | "entropy"; ConfigError otherwise.
CalibrationMethod parse_calibration_method(const std::string& name);
const char* calibration_method_name(CalibrationMethod method);

class ActivationObserver {
 public:
  static constexpr int kBins = 2048;

  // Pass 1: min and max; pass 2 (after start_histogram): the histogram of |x|.
  void observe(kernels::ConstVector x);
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

// One quantized Linear: its name ("fc1", "h.0.attn.c_attn"), weights s8 [out, in] row-major,
// per-row scales [out] and its input's quantization. Its bias stays an fp32 parameter.
struct Int8Layer {
  std::string name;
  std::int64_t out = 0, in = 0;
  std::vector<std::int8_t> weight;
  std::vector<float> weight_scale;
  kernels::ActivationQuant input;
};

// The model's Linears that int8 inference replaces, in forward order (all of them; models
// built without tensor parallelism).
std::vector<Linear*> quantizable_linears(Model& model);

// Quantizes `layer`'s weights (from the store) with input quantization `input`.
Int8Layer quantize_linear(const Linear& layer, const ParameterStore& store,
                          const kernels::ActivationQuant& input);

// Makes each named Linear of `model` run the int8 kernel; Error naming a layer that the
// model does not have or whose shape differs. Returns the names of the weights replaced (the
// fp32 weights a file of int8 layers does not hold).
void attach_int8(Model& model, const ParameterStore& store, const std::vector<Int8Layer>& layers,
                 kernels::Int8Backend backend = kernels::Int8Backend::automatic);

}  // namespace trellis::nn
