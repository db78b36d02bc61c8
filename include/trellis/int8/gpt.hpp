// The int8 form of the GPT (int8_model.hpp):
//   tokens -> wte + wpe -> drop     the fp32 model's embeddings (and dropout, the identity)
//   -> each block                   an Int8TransformerBlock (transformer_block.hpp)
//   -> ln_f -> head                 the fp32 LayerNorm; the tied head an Int8LinearLayer (W the
//                                   token table quantized per vocabulary row, no bias).
//                                   Chained: ln_f writes its output quantized for the head.
// A single-rank vocabulary only (no tensor parallelism), the whole model (no pipeline stage).
#pragma once

#include "trellis/int8/int8_model.hpp"
#include "trellis/int8/linear_layer.hpp"
#include "trellis/int8/transformer_block.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace trellis::int8 {

class Int8Gpt : public Int8Model {
 public:
  // Every block's Linears and the head from `layers` (all of which must be used); `gpt` and
  // `store` must outlive this model.
  Int8Gpt(nn::Gpt& gpt, const nn::ParameterStore& store, const std::vector<Int8Layer>& layers,
          const Int8Options& options);

  // input.tokens [>= n * T] -> logits [n * T, vocab], valid until the next forward; as
  // nn::Gpt::forward, inference only.
  ConstMatrix forward(const nn::ModelInput& input, int n, const nn::StepContext& ctx) override;
  void for_each_layer(const std::function<void(nn::Layer&)>& f) override;

  const Int8TransformerBlock& block(int i) const {
    return *blocks_.at(static_cast<std::size_t>(i));
  }

 private:
  nn::Gpt& gpt_;
  const nn::ParameterStore& store_;
  bool chained_;
  std::vector<std::unique_ptr<Int8TransformerBlock>> blocks_;
  std::unique_ptr<Int8LinearLayer> head_;
};

}  // namespace trellis::int8
