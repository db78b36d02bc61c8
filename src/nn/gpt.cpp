#include "trellis/nn/gpt.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/gemm.hpp"

#include <algorithm>
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
  const int kv = spec.n_kv_head > 0 ? spec.n_kv_head : spec.n_head;
  if (spec.n_kv_head < 0 || spec.n_head % kv != 0)
    throw ConfigError("gpt: model.n_kv_head (" + std::to_string(spec.n_kv_head) +
                      ") must divide model.n_head (" + std::to_string(spec.n_head) + ")");
  if (spec.d_ff < 0)
    throw ConfigError("gpt: model.d_ff must be >= 0 (0: 4 d_model), got " +
                      std::to_string(spec.d_ff));
  if (spec.positions == Positions::rope && (spec.d_model / spec.n_head) % 2 != 0)
    throw ConfigError(
        "gpt: rotary positions need an even head dimension, model.d_model / "
        "model.n_head = " +
        std::to_string(spec.d_model / spec.n_head));
  if (!(spec.norm_eps > 0.0f))
    throw ConfigError("gpt: model.norm_eps must be positive, got " + std::to_string(spec.norm_eps));
  positive(spec.capacity, "capacity (sequences per call)");
  const int units = spec.n_layer + 2;
  const int end = spec.stage.end_unit < 0 ? units : spec.stage.end_unit;
  if (spec.stage.first_unit < 0 || spec.stage.first_unit >= end || end > units)
    throw ConfigError("gpt: stage units [" + std::to_string(spec.stage.first_unit) + ", " +
                      std::to_string(end) + ") outside the model's " + std::to_string(units));
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
    : spec_(validated(spec)), store_(&store) {
  const int units = num_units(spec);
  first_unit_ = spec.stage.first_unit;
  end_unit_ = spec.stage.end_unit < 0 ? units : spec.stage.end_unit;
  const int rows = spec.capacity * spec.seq_len;
  const TensorParallel tp = spec.tp;
  const InitSpec table_init = InitSpec::normal(0.02);
  if (tp.active() && spec.vocab % tp.size() != 0)
    throw ConfigError("gpt: model.vocab " + std::to_string(spec.vocab) +
                      " is not divisible by parallel.tp = " + std::to_string(tp.size()));
  // Registration in forward order; the token table comes first on every stage that holds it
  // (as the embedding, or as the head's tied copy), so its gradient is the last to be final.
  if (first_stage()) {
    wte_ = std::make_unique<Embedding>(store, prefix + "wte", spec.vocab, spec.d_model, rows,
                                       table_init, tp);
    wte_index_ = wte_->weight_index();
    if (spec.positions == Positions::learned) {
      wpe_ = std::make_unique<PositionalEmbedding>(store, prefix + "wpe", spec.seq_len,
                                                   spec.d_model, rows);
      wpe_offset_ = store.info(wpe_->weight_index()).offset;
    }
    drop_ = std::make_unique<Dropout>(prefix + "drop", spec.d_model, rows, spec.dropout);
  } else if (last_stage() && spec.tied_head) {
    const Shape table{spec.vocab, spec.d_model};
    wte_index_ = tp.active() ? store.add(prefix + "wte.weight", table, table_init, false,
                                         ShardSpec::split(0, tp.size(), tp.rank()))
                             : store.add(prefix + "wte.weight", table, table_init, false);
  }
  const TransformerInit init =
      spec.scaled_residual_init ? TransformerInit::gpt2(spec.n_layer) : TransformerInit{};
  const int first_block = std::max(first_unit_, 1) - 1;
  const int end_block = std::min(end_unit_, units - 1) - 1;
  if (spec.positions == Positions::rope && first_block < end_block)
    rope_ = std::make_unique<RotaryTables>(spec.rope, spec.d_model / spec.n_head, spec.seq_len);
  const BlockSpec block = gpt_block_spec(spec, rope_.get());
  sequence_ = tp.sequence && tp.active();
  stack_ = std::make_unique<BlockStack>(prefix + "h", spec.recompute,
                                        sequence_ ? rows / tp.size() : rows, &store);
  if (sequence_) {
    const std::size_t size =
        static_cast<std::size_t>(rows) * static_cast<std::size_t>(spec.d_model);
    stack_output_ = layer_buffer(BufferRole::own, "trellis::nn::" + prefix + "h.output", size);
    stack_input_grad_ =
        layer_buffer(BufferRole::own, "trellis::nn::" + prefix + "h.input_grad", size);
  }
  for (int i = first_block; i < end_block; ++i) {
    {
      const SharedBufferScope shared = stack_->building(blocks_.size());
      block_offsets_.push_back(store.registration_cursor());  // after the unit's padding
      blocks_.push_back(
          std::make_unique<Block>(store, prefix + "h." + std::to_string(i), block, rows, init, tp));
    }
    stack_->add(*blocks_.back());
  }
  stack_->finish();
  if (last_stage()) {
    ln_f_offset_ = store.registration_cursor();
    ln_f_ = std::make_unique<LayerNorm>(store, prefix + "ln_f", spec.d_model, rows, spec.norm_eps,
                                        spec.norm);
    std::size_t head_weight = wte_index_;
    if (!spec.tied_head) {  // its own table [V, d], vocabulary-parallel as wte
      const Shape table{spec.vocab, spec.d_model};
      head_weight = tp.active() ? store.add(prefix + "lm_head.weight", table, table_init, true,
                                            ShardSpec::split(0, tp.size(), tp.rank()))
                                : store.add(prefix + "lm_head.weight", table, table_init, true);
      head_offset_ = store.info(head_weight).offset;
    }
    head_ = std::make_unique<TiedHead>(store, prefix + "lm_head", head_weight, spec.d_model,
                                       local_classes(), rows, tp);
  }
}

int Gpt::local_classes() const { return spec_.vocab / spec_.tp.size(); }
int Gpt::class_offset() const { return spec_.tp.rank() * local_classes(); }

std::vector<std::string> Gpt::tied_parameters() const {
  if (spec_.tied_head && first_stage() != last_stage() && (first_stage() || last_stage()))
    return {store_->info(wte_index_).name};
  return {};
}

ConstMatrix Gpt::forward(const ModelInput& input, int n, const StepContext& ctx) {
  const int T = spec_.seq_len;
  if (n < 0 || n > spec_.capacity) {
    throw Error("gpt: forward of " + std::to_string(n) + " sequences, capacity is " +
                std::to_string(spec_.capacity));
  }
  const int rows = n * T;
  // Every layer works on token rows: its first_sample is the global token row of row 0.
  StepContext row_ctx = ctx;
  row_ctx.first_sample = ctx.first_sample * T;

  last_n_ = -1;  // a throwing forward leaves no backward to run
  ConstMatrix x;
  if (first_stage()) {
    if (input.tokens.extent(0) < static_cast<std::size_t>(rows)) {
      throw Error("gpt: " + std::to_string(input.tokens.extent(0)) + " token ids for " +
                  std::to_string(n) + " sequences of " + std::to_string(T));
    }
    wte_->forward(input.tokens, rows, row_ctx);
    if (wpe_) wpe_->forward(wte_->output(), rows, row_ctx);
    drop_->forward(wpe_ ? wpe_->output() : wte_->output(), rows, row_ctx);
    x = drop_->output();
  } else {
    x = kernels::first_rows(input.activations, rows);  // checks the row count
    TRELLIS_REQUIRE(x.extent(1) == static_cast<std::size_t>(spec_.d_model),
                    "gpt stage: input activations " + kernels::extents_string(x));
  }
  if (sequence_) {
    const int own = rows / spec_.tp.size();
    x = all_rows(stack_->forward(own_rows(x, rows), own, row_ctx), own, stack_output_);
  } else {
    x = stack_->forward(x, rows, row_ctx);
  }
  last_n_ = n;
  if (!last_stage()) return kernels::first_rows(x, rows);
  ln_f_->forward(x, rows, row_ctx);
  // logits [rows, V/tp] = hf [rows, d] wte[V/tp, d]^T (this rank's vocabulary).
  head_->forward(ln_f_->output(), rows, row_ctx);
  return kernels::first_rows(head_->output(), rows);
}

void Gpt::backward(ConstMatrix dout, int n) {
  if (n != last_n_) {
    throw Error("gpt: backward of " + std::to_string(n) +
                " sequences does not follow a forward of the same sequences");
  }
  const int rows = n * spec_.seq_len;
  const ConstMatrix dy = kernels::first_rows(dout, rows);  // checks the row count
  TRELLIS_REQUIRE(dout.extent(1) == static_cast<std::size_t>(stage_output_width()),
                  "gpt: output gradient " + kernels::extents_string(dout) + " for width " +
                      std::to_string(stage_output_width()));
  ConstMatrix dx = dy;
  if (last_stage()) {
    head_->backward(dy, rows);                                     // dwte += dl^T hf, dhf = dl wte
    if (!spec_.tied_head) store_->grads_final_from(head_offset_);  // registered last
    ln_f_->backward(head_->input_grad(), rows);
    store_->grads_final_from(ln_f_offset_);
    dx = ln_f_->input_grad();
  }
  const auto block_done = [&](std::size_t i) { store_->grads_final_from(block_offsets_[i]); };
  if (sequence_) {
    const int own = rows / spec_.tp.size();
    dx = all_rows(stack_->backward(own_rows(dx, rows), own, block_done), own, stack_input_grad_);
  } else {
    dx = stack_->backward(dx, rows, block_done);
  }
  if (!first_stage()) {
    input_grad_ = dx;  // [capacity rows, d]: to the previous stage
    // The tied copy of wte (last stage) was registered first: final now.
    if (last_stage() && spec_.tied_head) store_->grads_final_from(store_->info(wte_index_).offset);
    return;
  }
  drop_->backward(dx, rows);
  ConstMatrix dembed = drop_->input_grad();
  if (wpe_) {
    wpe_->backward(dembed, rows);
    store_->grads_final_from(wpe_offset_);
    dembed = wpe_->input_grad();
  }
  wte_->backward(dembed, rows);  // wte was registered first: the rest is final
  store_->grads_final_from(store_->info(wte_index_).offset);
}

std::vector<KvCache> Gpt::make_caches() const {
  TRELLIS_REQUIRE(first_stage() && last_stage(),
                  "gpt: generation with a cache needs the whole model on one stage");
  std::vector<KvCache> caches;
  for (const auto& block : blocks_) caches.push_back(block->attn().make_cache(spec_.seq_len));
  return caches;
}

ConstMatrix Gpt::forward_cached(kernels::ConstLabels tokens, int rows, int first_position,
                                std::vector<KvCache>& caches) {
  TRELLIS_REQUIRE(first_stage() && last_stage() && caches.size() == blocks_.size(),
                  "gpt: forward_cached needs the whole model and one cache per block");
  TRELLIS_REQUIRE(rows > 0 && first_position >= 0 && first_position + rows <= spec_.seq_len &&
                      tokens.extent(0) >= static_cast<std::size_t>(rows),
                  "gpt: forward_cached of " + std::to_string(rows) + " tokens at position " +
                      std::to_string(first_position) + " (context " +
                      std::to_string(spec_.seq_len) + ", " + std::to_string(tokens.extent(0)) +
                      " token ids)");
  StepContext eval;
  eval.training = false;
  last_n_ = -1;  // no backward follows
  wte_->forward(tokens, rows, eval);
  ConstMatrix x = wte_->output();
  if (wpe_) {
    wpe_->forward_at(x, rows, first_position);
    x = wpe_->output();
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    blocks_[i]->forward_cached(x, rows, first_position, caches[i]);
    x = stack_->keep(i, blocks_[i]->output(), rows);
  }
  ln_f_->forward(x, rows, eval);
  head_->forward(ln_f_->output(), rows, eval);
  return kernels::first_rows(head_->output(), rows);
}

int Gpt::stage_output_width() const { return last_stage() ? local_classes() : spec_.d_model; }

ConstMatrix Gpt::own_rows(ConstMatrix all, int rows) const {
  const std::size_t own = static_cast<std::size_t>(rows / spec_.tp.size());
  return ConstMatrix(all.data() + static_cast<std::size_t>(spec_.tp.rank()) * own * all.extent(1),
                     own, all.extent(1));
}

ConstMatrix Gpt::all_rows(ConstMatrix own, int rows, const FloatView& into) const {
  const std::size_t d = own.extent(1);
  spec_.tp.comm->all_gather(own.data(), into.data(), static_cast<std::size_t>(rows) * d);
  return as_matrix(into, static_cast<int>(into.extent(0) / d), static_cast<int>(d));
}

BlockSpec gpt_block_spec(const GptSpec& spec, const RotaryTables* rope) {
  BlockSpec b = BlockSpec::gpt2(spec.d_model, spec.n_head, spec.seq_len, spec.dropout);
  b.n_kv_head = spec.n_kv_head;
  b.d_ff = spec.d_ff;
  b.mlp = spec.mlp;
  b.norm = spec.norm;
  b.norm_eps = spec.norm_eps;
  b.bias = spec.bias;
  b.rope = rope;
  b.recompute_cheap = spec.recompute.mode == Recompute::selective;
  return b;
}

long double gpt_block_params(const GptSpec& spec) {
  using Count = long double;
  const BlockSpec b = gpt_block_spec(spec, nullptr);
  const Count d = spec.d_model, hd = d / spec.n_head, f = b.ff_width();
  const Count qkv = (spec.n_head + 2 * static_cast<Count>(b.kv_heads())) * hd;
  const Count gates = spec.mlp == MlpKind::swiglu ? 2 : 1;
  const Count norms = (spec.norm == NormKind::layernorm ? 4 : 2) * d;
  const Count biases = spec.bias ? qkv + d + gates * f + d : 0;
  return norms + qkv * d + d * d + gates * f * d + f * d + biases;
}

long double gpt_num_params(const GptSpec& spec) {
  using Count = long double;
  const Count d = spec.d_model, V = spec.vocab;
  return V * d * (spec.tied_head ? 1 : 2) +
         (spec.positions == Positions::learned ? static_cast<Count>(spec.seq_len) * d : 0) +
         spec.n_layer * gpt_block_params(spec) + (spec.norm == NormKind::layernorm ? 2 : 1) * d;
}

std::vector<double> gpt_unit_costs(const GptSpec& spec) {
  const double d = spec.d_model, T = spec.seq_len, V = spec.vocab;
  std::vector<double> costs;
  costs.push_back(d);  // embeddings: lookups and adds, next to nothing
  for (int i = 0; i < spec.n_layer; ++i)
    costs.push_back(static_cast<double>(gpt_block_params(spec)) + 2.0 * T * d);
  costs.push_back(V * d);  // the head's matmul
  return costs;
}

namespace {

// Every parameter but the lookup tables: wpe, and wte when the head has its own weight (tied,
// wte counts once, for the head's matmul). The whole model's count: with tp each rank does
// about 1/tp of these FLOPs.
long double matmul_params(const GptSpec& spec) {
  const long double d = spec.d_model, V = spec.vocab;
  long double n = gpt_num_params(spec) - (spec.tied_head ? 0 : V * d);
  if (spec.positions == Positions::learned) n -= static_cast<long double>(spec.seq_len) * d;
  return n;
}

}  // namespace

long double gpt_flops_per_sequence(const GptSpec& spec) {
  const long double T = spec.seq_len;
  return 6 * matmul_params(spec) * T + 12.0L * spec.n_layer * spec.d_model * T * T;
}

// A built model's counts are realistic (its buffers exist): they fit in 64 bits.
std::int64_t Gpt::num_matmul_params() const {
  return static_cast<std::int64_t>(matmul_params(spec_));
}

std::int64_t Gpt::flops_per_sample() const {
  return static_cast<std::int64_t>(gpt_flops_per_sequence(spec_));
}

std::string Gpt::describe() const {
  std::string text = "gpt L" + std::to_string(spec_.n_layer) + " H" + std::to_string(spec_.n_head) +
                     " D" + std::to_string(spec_.d_model) + " T" + std::to_string(spec_.seq_len) +
                     " V" + std::to_string(spec_.vocab);
  if (spec_.n_kv_head > 0 && spec_.n_kv_head != spec_.n_head)
    text += " KV" + std::to_string(spec_.n_kv_head);
  if (spec_.d_ff > 0) text += " F" + std::to_string(spec_.d_ff);
  if (spec_.positions == Positions::rope) text += " rope";
  if (spec_.norm == NormKind::rmsnorm) text += " rmsnorm";
  if (spec_.mlp != MlpKind::gelu) text += std::string(" ") + mlp_kind_name(spec_.mlp);
  if (!spec_.bias) text += " nobias";
  if (!spec_.tied_head) text += " untied";
  if (!first_stage() || !last_stage())
    text += ", units [" + std::to_string(first_unit_) + ", " + std::to_string(end_unit_) + ")";
  return text;
}

}  // namespace trellis::nn
