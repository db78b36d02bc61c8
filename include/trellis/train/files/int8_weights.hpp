// The int8 model file written by `trellis quantize`: a weights file (weights_file.hpp, format
// "trellis.weights", so `trellis eval` and `trellis generate` open it like any other) with
//
//   attribute  quantization = "int8", calibration = "<method> on <N> samples of <data>"
//   params/<name>, buffers/<name>   float32, as in a weights file, except the weights of the
//                                   quantized Linears, which are only here:
//   int8/<layer>/weight             int8 [out, in] (Linear) or [out, C, k, k] (Conv2d):
//                                   round(w / weight_scale[o]) in [-127, 127]
//   int8/<layer>/weight_scale       float32 [out]: max |w[o, ...]| / 127 (1 for a zero row)
//   int8/<layer>/bias               float32 [out], convolutions: the bias the kernel adds (the
//                                   folded BatchNorm's, or the layer's own, or zeros)
//     attributes input_type ("u8" | "s8"), input_scale (float32), input_zero_point (int32):
//     the quantization of the layer's input, x_q = clamp(round(x / s) + z); folded_norm
//     (string, convolutions): the BatchNorm folded into the weights and bias, which runs as
//     the identity (its parameters and statistics stay in params/ and buffers/)
//
// Written by one process into "<path>.tmp" and published durably (core/durable_file.hpp).
#pragma once

#include "trellis/int8/quantize_layer.hpp"
#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <set>
#include <string>
#include <vector>

namespace trellis {

// Whether the weights file at `path` is an int8 model (InputError when it is no weights file).
bool is_int8_weights(const std::string& path);

void write_int8_weights(const std::string& path, const nn::ParameterStore& store,
                        const std::vector<nn::NamedBuffer>& buffers,
                        const std::vector<int8::Int8Layer>& layers, const std::string& config_ini,
                        const std::string& calibration, const std::string& tokenizer_json = "");

// The int8 layers of such a file; InputError naming the file and dataset when one is bad.
std::vector<int8::Int8Layer> read_int8_layers(const std::string& path);

// The parameter names whose fp32 values an int8 file leaves out ("<layer>.weight"; a
// convolution's own bias too: the kernel's bias replaces it).
std::set<std::string> int8_weight_names(const std::vector<int8::Int8Layer>& layers);

}  // namespace trellis
