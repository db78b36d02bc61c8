// Int8 inference of a trained model: a model of its own, converted from the fp32 one (as
// torchtitan's model converters swap modules), so no training layer has an int8 branch.
//
// An Int8Model owns the fp32 model it was converted from and runs forward only: the int8
// layers in place of the fp32 model's Linears, convolutions and tied head, and the fp32
// model's other layers (embeddings, LayerNorms, dropout, pooling) as they are, reading the
// parameters of the fp32 model's store. Sizes, names, FLOPs and buffers are the fp32 model's;
// backward throws.
//
// Each model family converts its own way (model_registry's to_int8; mlp.hpp, cnn.hpp,
// gpt.hpp here), and every int8 layer of the weights file must be used.
#pragma once

#include "trellis/core/error.hpp"
#include "trellis/int8/layer_table.hpp"
#include "trellis/nn/model.hpp"

#include <memory>
#include <string>
#include <vector>

namespace trellis::int8 {

class Int8Model : public nn::Model {
 public:
  void backward(ConstMatrix dlogits, int n) override;
  int classes() const override { return fp32_.classes(); }
  int rows_per_sample() const override { return fp32_.rows_per_sample(); }
  int capacity() const override { return fp32_.capacity(); }
  bool takes_tokens() const override { return fp32_.takes_tokens(); }
  std::int64_t flops_per_sample() const override { return fp32_.flops_per_sample(); }
  std::string describe() const override { return fp32_.describe(); }
  std::vector<nn::NamedBuffer> buffers() const override { return fp32_.buffers(); }
  std::vector<std::pair<std::string, std::string>> conv_batchnorm_pairs() const override {
    return fp32_.conv_batchnorm_pairs();
  }

  // Makes this model own the fp32 model it was converted from.
  void keep(std::unique_ptr<nn::Model> fp32);

 protected:
  explicit Int8Model(nn::Model& fp32);
  nn::Model& fp32() { return fp32_; }

 private:
  nn::Model& fp32_;
  std::unique_ptr<nn::Model> owned_;
};

// A model converted by `convert` (a family's converter, typed) that owns `fp32`: Error when
// `fp32` is not a Fp32.
template <class Fp32, class Convert>
std::unique_ptr<nn::Model> convert_owned(std::unique_ptr<nn::Model> fp32, Convert&& convert) {
  auto* typed = dynamic_cast<Fp32*>(fp32.get());
  if (typed == nullptr) throw Error("int8: " + fp32->describe() + " is not the model expected");
  std::unique_ptr<Int8Model> int8 = convert(*typed);
  int8->keep(std::move(fp32));
  return int8;
}

}  // namespace trellis::int8
