// The int8 layers of a weights file, handed out by name while an int8 model is built from a
// trained one (int8_model.hpp), with the kernels they make.
#pragma once

#include "trellis/int8/quantize_layer.hpp"
#include "trellis/kernels/conv.hpp"
#include "trellis/kernels/int8.hpp"
#include "trellis/kernels/int8_conv.hpp"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace trellis::int8 {

struct Int8Options {
  kernels::Int8Backend backend = kernels::Int8Backend::automatic;
  // Where a model chains its int8 layers (the GPT's blocks and head: LayerNorms writing
  // quantized bytes, residual adds in epilogues): false runs each int8 Linear on its own,
  // quantizing its fp32 input, which is what the tests hold the chained path to.
  bool fuse = true;
};

class Int8LayerTable {
 public:
  // Error on two layers of one name.
  explicit Int8LayerTable(const std::vector<Int8Layer>& layers);

  // The layer named `name`; Error when there is none (a file written by trellis quantize has
  // every Linear, convolution and head of its model).
  const Int8Layer& take(const std::string& name);
  // Error naming the file's layers that no take() asked for: the model has no such layer.
  void require_all_taken() const;

 private:
  std::map<std::string, const Int8Layer*> layers_;
  std::set<std::string> taken_;
};

// The kernel of a Linear's (or head's) int8 layer: weights [out, in] must fit in and out
// (Error naming the layer otherwise); bias [out] fp32 (copied in).
std::unique_ptr<kernels::Int8Linear> make_int8_linear(const Int8Layer& q, int in, int out,
                                                      kernels::ConstVector bias,
                                                      kernels::Activation activation,
                                                      kernels::Int8Backend backend);
// The kernel of a convolution's int8 layer over `geometry` with `out_channels` outputs (Error
// naming the layer when the weights do not fit); its bias is the layer's own (zeros if none).
std::unique_ptr<kernels::Int8Conv2d> make_int8_conv(const Int8Layer& q,
                                                    const kernels::ConvGeometry& geometry,
                                                    int out_channels, int capacity,
                                                    kernels::Activation activation,
                                                    kernels::Int8Backend backend);

}  // namespace trellis::int8
