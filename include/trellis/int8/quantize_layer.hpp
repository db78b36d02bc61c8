// Post-training int8 quantization of a trained model's Linears, convolutions and tied head:
// what `trellis quantize` computes and the int8 weights file holds (train/files/int8_weights.hpp).
//
// Weights are symmetric per output row or channel (kernels::quantize_weights): no
// calibration. A BatchNorm that normalises a convolution's output (nn::Model::
// conv_batchnorm_pairs) is folded into it first, with its running statistics:
//   w'[o] = w[o] g[o],  b'[o] = beta[o] + (b[o] - mean[o]) g[o],  g[o] = gamma[o] / sqrt(var[o] +
//   eps)
// The input's quantization comes from calibration (calibration.hpp).
#pragma once

#include "trellis/kernels/int8.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::int8 {

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

// The model's Linears, Conv2ds and tied head, which int8 inference replaces, in forward
// order (all of them; models built without tensor parallelism).
std::vector<nn::Layer*> quantizable_layers(nn::Model& model);

// Quantizes `layer`'s weights (from the store) with input quantization `input`; a Conv2d
// with `norm` gets it folded in (running statistics from the model's buffers).
Int8Layer quantize_layer(const nn::Layer& layer, const nn::ParameterStore& store,
                         const kernels::ActivationQuant& input,
                         const nn::BatchNorm2d* norm = nullptr);

}  // namespace trellis::int8
