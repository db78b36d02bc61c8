// Post-training int8 quantization of a model's Linear and Conv2d layers (trellis quantize, eval
// and generate of an int8 model; kernels/int8.hpp and kernels/int8_conv.hpp have the
// arithmetic).
//
// Calibration: an ActivationObserver attached to a layer sees its input on N batches, twice:
// the first pass records min and max, the second fills a 2048-bin histogram of |x| over
// [0, max |x|]. The input's quantization is then chosen per tensor:
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
// Weights are symmetric per output row or channel (kernels::quantize_weights): no
// calibration. A BatchNorm that normalises a convolution's output (Model::
// conv_batchnorm_pairs) is folded into it first, with its running statistics:
//   w'[o] = w[o] g[o],  b'[o] = beta[o] + (b[o] - mean[o]) g[o],  g[o] = gamma[o] / sqrt(var[o] +
//   eps)
// and runs as the identity.
//
// Int8Layer is what the int8 weights file holds for one layer; attach_int8() makes a built
// model's Linears and convolutions run int8 (LayerNorm, softmax, embeddings, pooling,
// activations between layers and residual adds stay fp32).
#pragma once

#include "trellis/kernels/int8.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::nn {

class BatchNorm2d;
class Layer;

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

// One quantized layer: its name ("fc1", "h.0.attn.c_attn", "stage1.block1.conv1"), weights
// s8 row-major, per-output scales and its input's quantization. A Linear's bias stays an fp32
// parameter; a convolution's bias (its own, or its folded BatchNorm's) comes with it.
struct Int8Layer {
  std::string name;
  Shape weight_shape;  // [out, in] (Linear) or [out, C, k, k] (Conv2d)
  std::vector<std::int8_t> weight;
  std::vector<float> weight_scale;  // [out]
  kernels::ActivationQuant input;
  std::vector<float> bias;  // [out], convolutions only
  std::string folded_norm;  // the BatchNorm folded into this convolution ("" none)
  std::int64_t out() const { return weight_shape.at(0); }
  bool is_conv() const { return weight_shape.size() == 4; }
};

// The quantized-input bytes [capacity * in] of `layer` for its int8 kernel (empty without
// one); Error naming the layer when the kernel's shape is not the layer's.
kernels::ByteView int8_input_buffer(const Layer& layer, const kernels::Int8Linear* kernel);

// The model's Linears and Conv2ds that int8 inference replaces, in forward order (all of
// them; models built without tensor parallelism).
std::vector<Layer*> quantizable_layers(Model& model);
// Attaches an observer to a Linear or Conv2d (nullptr detaches it).
void set_input_observer(Layer& layer, ActivationObserver* observer);

// Quantizes `layer`'s weights (from the store) with input quantization `input`; a Conv2d
// with `norm` gets it folded in (running statistics from the model's buffers).
Int8Layer quantize_layer(const Layer& layer, const ParameterStore& store,
                         const kernels::ActivationQuant& input, const BatchNorm2d* norm = nullptr);

// Makes each named layer of `model` run its int8 kernel (and each folded BatchNorm the
// identity); Error naming a layer the model does not have or whose shape differs. Then the
// model fuses its int8 layers as it can (Model::int8_attached: the CNN's channels-last
// residual blocks, the GPT's chained blocks); with fuse = false each layer runs on its own,
// quantizing its fp32 input (what the tests hold the fused paths to).
void attach_int8(Model& model, const ParameterStore& store, const std::vector<Int8Layer>& layers,
                 kernels::Int8Backend backend = kernels::Int8Backend::automatic, bool fuse = true);

}  // namespace trellis::nn
