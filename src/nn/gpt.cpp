#include "trellis/nn/gpt.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/gemm.hpp"

#include <string>

namespace trellis::nn {

void validate(const GptSpec& spec) {
  auto positive = [](int value, const char* key) {
    if (value <= 0) {
      throw ConfigError(std::string("gpt: ") + key + " must be positive, got " +
                        std::to_string(value));
    }
  };
  positive(spec.n_layer, "model.n_layer");
  positive(spec.n_head, "model.n_head");
  positive(spec.d_model, "model.d_model");
  if (spec.d_model % spec.n_head != 0) {
    throw ConfigError("gpt: model.d_model (" + std::to_string(spec.d_model) +
                      ") must be divisible by model.n_head (" + std::to_string(spec.n_head) + ")");
  }
  positive(spec.seq_len, "model.seq_len");
  positive(spec.vocab, "model.vocab");
  if (!(spec.dropout >= 0.0f && spec.dropout < 1.0f)) {
    throw ConfigError("gpt: model.dropout must be in [0, 1), got " + std::to_string(spec.dropout));
  }
  positive(spec.capacity, "capacity (sequences per call)");
  // Layers count rows with int.
  if (static_cast<long long>(spec.capacity) * spec.seq_len > 2147483647LL) {
    throw ConfigError("gpt: capacity " + std::to_string(spec.capacity) + " x model.seq_len " +
                      std::to_string(spec.seq_len) + " token rows exceed 2^31 - 1");
  }
}

namespace {

const GptSpec& validated(const GptSpec& spec) {
  validate(spec);
  return spec;
}

}  // namespace

Gpt::Gpt(const GptSpec& spec, ParameterStore& store, const std::string& prefix)
    : spec_(validated(spec)),
      store_(&store),
      wte_(store, prefix + "wte", spec.vocab, spec.d_model, spec.capacity * spec.seq_len,
           InitSpec::normal(0.02), spec.tp),
      wpe_(store, prefix + "wpe", spec.seq_len, spec.d_model, spec.capacity * spec.seq_len),
      drop_(prefix + "drop", spec.d_model, spec.capacity * spec.seq_len, spec.dropout) {
  const int rows = spec.capacity * spec.seq_len;
  const TransformerInit init = TransformerInit::gpt2(spec.n_layer);
  wpe_offset_ = store.info(wpe_.weight_index()).offset;
  for (int i = 0; i < spec.n_layer; ++i) {
    block_offsets_.push_back(store.buffer_size());
    blocks_.push_back(std::make_unique<Block>(store, prefix + "h." + std::to_string(i),
                                              spec.d_model, spec.n_head, spec.seq_len, rows,
                                              spec.dropout, init, spec.tp));
  }
  ln_f_offset_ = store.buffer_size();
  ln_f_ = std::make_unique<LayerNorm>(store, prefix + "ln_f", spec.d_model, rows);
  logits_ = FloatView("trellis::nn::" + prefix + "gpt.logits",
                      static_cast<std::size_t>(rows) * static_cast<std::size_t>(local_classes()));
  dhf_ = FloatView("trellis::nn::" + prefix + "gpt.dhf",
                   static_cast<std::size_t>(rows) * static_cast<std::size_t>(spec.d_model));
}

ConstMatrix Gpt::forward(kernels::ConstLabels tokens, int n, const StepContext& ctx) {
  const int T = spec_.seq_len;
  if (n < 0 || n > spec_.capacity) {
    throw Error("gpt: forward of " + std::to_string(n) + " sequences, capacity is " +
                std::to_string(spec_.capacity));
  }
  const int rows = n * T;
  if (tokens.extent(0) < static_cast<std::size_t>(rows)) {
    throw Error("gpt: " + std::to_string(tokens.extent(0)) + " token ids for " + std::to_string(n) +
                " sequences of " + std::to_string(T));
  }
  // Every layer works on token rows: its first_sample is the global token row of row 0.
  StepContext row_ctx = ctx;
  row_ctx.first_sample = ctx.first_sample * T;

  last_n_ = -1;  // a throwing forward leaves no backward to run
  wte_.forward(tokens, rows, row_ctx);
  wpe_.forward(wte_.output(), rows, row_ctx);
  drop_.forward(wpe_.output(), rows, row_ctx);
  ConstMatrix x = drop_.output();
  for (auto& block : blocks_) {
    block->forward(x, rows, row_ctx);
    x = block->output();
  }
  ln_f_->forward(x, rows, row_ctx);
  const Matrix logits = as_matrix(logits_, rows, local_classes());
  // logits [rows, V/tp] = hf [rows, d] wte[V/tp, d]^T: the tied head (this rank's vocabulary).
  kernels::gemm(false, true, 1.0f, kernels::first_rows(ln_f_->output(), rows),
                store_->param_matrix(wte_.weight_index()), 0.0f, logits);
  last_n_ = n;
  return logits;
}

void Gpt::backward(ConstMatrix dlogits, int n) {
  if (n != last_n_) {
    throw Error("gpt: backward of " + std::to_string(n) +
                " sequences does not follow a forward of the same sequences");
  }
  const int rows = n * spec_.seq_len;
  const ConstMatrix dl = kernels::first_rows(dlogits, rows);  // checks the row count
  TRELLIS_REQUIRE(dlogits.extent(1) == static_cast<std::size_t>(local_classes()),
                  "gpt: dlogits " + kernels::extents_string(dlogits) + " for vocab " +
                      std::to_string(local_classes()));
  const ConstMatrix hf = kernels::first_rows(ln_f_->output(), rows);
  const std::size_t w = wte_.weight_index();
  kernels::gemm(true, false, 1.0f, dl, hf, 1.0f, store_->grad_matrix(w));  // dwte += dl^T hf
  const Matrix dhf = as_matrix(dhf_, rows, spec_.d_model);
  kernels::gemm(false, false, 1.0f, dl, store_->param_matrix(w), 0.0f, dhf);  // dhf = dl wte
  // Each tp rank's vocabulary slice contributes a part of dhf.
  if (spec_.tp.active()) spec_.tp.comm->all_reduce(dhf.data(), dhf.size(), ReduceOp::sum);
  ln_f_->backward(dhf, rows);
  store_->grads_final_from(ln_f_offset_);
  ConstMatrix dx = ln_f_->input_grad();
  for (std::size_t i = blocks_.size(); i-- > 0;) {
    blocks_[i]->backward(dx, rows);
    dx = blocks_[i]->input_grad();
    store_->grads_final_from(block_offsets_[i]);
  }
  drop_.backward(dx, rows);
  wpe_.backward(drop_.input_grad(), rows);
  store_->grads_final_from(wpe_offset_);
  wte_.backward(wpe_.input_grad(), rows);  // wte was registered first: offset 0 onwards
  store_->grads_final_from(store_->info(w).offset);
}

std::int64_t Gpt::num_matmul_params() const {
  const std::int64_t d = spec_.d_model, V = spec_.vocab, L = spec_.n_layer;
  const std::int64_t per_block = 2 * 2 * d            // ln_1, ln_2
                                 + 3 * d * d + 3 * d  // c_attn
                                 + d * d + d          // attn.c_proj
                                 + 4 * d * d + 4 * d  // c_fc
                                 + 4 * d * d + d;     // mlp.c_proj
  return V * d + L * per_block + 2 * d;               // wte (tied head), blocks, ln_f
  // (the whole model's count: with tp each rank does about 1/tp of these FLOPs)
}

std::int64_t Gpt::flops_per_sample() const {
  const std::int64_t T = spec_.seq_len;
  return 6 * num_matmul_params() * T +
         12 * static_cast<std::int64_t>(spec_.n_layer) * spec_.d_model * T * T;
}

std::string Gpt::describe() const {
  return "gpt L" + std::to_string(spec_.n_layer) + " H" + std::to_string(spec_.n_head) + " D" +
         std::to_string(spec_.d_model) + " T" + std::to_string(spec_.seq_len) + " V" +
         std::to_string(spec_.vocab);
}

}  // namespace trellis::nn
