#include "trellis/int8/gpt.hpp"

#include "trellis/core/error.hpp"

namespace trellis::int8 {

namespace {

nn::Gpt& whole_model(nn::Gpt& gpt) {
  if (gpt.spec().tp.active())
    throw Error("int8: " + gpt.describe() +
                " is split over tensor-parallel ranks; int8 inference takes the whole model");
  return gpt;
}

}  // namespace

Int8Gpt::Int8Gpt(nn::Gpt& gpt, const nn::ParameterStore& store,
                 const std::vector<Int8Layer>& layers, const Int8Options& options)
    : Int8Model(whole_model(gpt)), gpt_(gpt), store_(store), chained_(options.fuse) {
  Int8LayerTable table(layers);
  for (int i = 0; i < gpt.num_blocks(); ++i)
    blocks_.push_back(std::make_unique<Int8TransformerBlock>(gpt.block(i), store, table, options));
  head_ =
      std::make_unique<Int8LinearLayer>(table.take(gpt.head().name()), gpt.head(), options.backend);
  table.require_all_taken();
}

ConstMatrix Int8Gpt::forward(const nn::ModelInput& input, int n, const nn::StepContext& ctx) {
  const int T = gpt_.spec().seq_len;
  if (n < 0 || n > capacity())
    throw Error("gpt: forward of " + std::to_string(n) + " sequences, capacity is " +
                std::to_string(capacity()));
  const int rows = n * T;
  if (input.tokens.extent(0) < static_cast<std::size_t>(rows))
    throw Error("gpt: " + std::to_string(input.tokens.extent(0)) + " token ids for " +
                std::to_string(n) + " sequences of " + std::to_string(T));
  TRELLIS_REQUIRE(!ctx.training, "int8 model " + describe() + ": inference only");
  nn::StepContext row_ctx = ctx;  // layers count token rows
  row_ctx.first_sample = ctx.first_sample * T;
  gpt_.wte().forward(input.tokens, rows, row_ctx);
  nn::PositionalEmbedding* wpe = gpt_.wpe();  // none with rotary positions
  if (wpe != nullptr) wpe->forward(gpt_.wte().output(), rows, row_ctx);
  gpt_.drop().forward(wpe != nullptr ? wpe->output() : gpt_.wte().output(), rows, row_ctx);
  ConstMatrix x = gpt_.drop().output();
  for (auto& block : blocks_) {
    block->forward(x, rows, row_ctx);
    x = block->output();
  }
  nn::LayerNorm& ln_f = gpt_.ln_f();
  if (chained_) {  // ln_f writes its output quantized for the head
    ln_f.forward_quantized(x, rows, head_->input_quantization(), head_->quantized_input());
    head_->forward_quantized_input(rows);
  } else {
    ln_f.forward(x, rows, row_ctx);
    head_->forward(ln_f.output(), rows, row_ctx);
  }
  return kernels::first_rows(head_->output(), rows);
}

void Int8Gpt::for_each_layer(const std::function<void(nn::Layer&)>& f) {
  for (auto& block : blocks_) f(*block);
  f(*head_);
}

}  // namespace trellis::int8
