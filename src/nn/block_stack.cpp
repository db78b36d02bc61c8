#include "trellis/nn/block_stack.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::nn {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw ConfigError("memory.recompute: expected none, selective or full, got \"" + name + "\"");
}

const char* recompute_name(Recompute mode) {
  switch (mode) {
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
    case Recompute::none:
      break;
  }
  return "none";
}

BlockStack::BlockStack(const std::string& name, RecomputeSpec spec, int capacity_rows,
                       ParameterStore* units)
    : name_(name), spec_(spec), units_store_(units), capacity_(capacity_rows) {
  if (spec_.every < 1)
    throw ConfigError("memory.recompute_every must be at least 1, got " +
                      std::to_string(spec_.every));
  for (int parity = 0; parity < 2; ++parity)
    scratch_[parity] = std::make_unique<BufferPool>("trellis::scratch::" + name + "." +
                                                    std::to_string(parity) + ".");
  if (recomputes())
    for (int pos = 0; pos < spec_.every; ++pos)
      saved_.push_back(std::make_unique<BufferPool>("trellis::recompute::" + name + "." +
                                                    std::to_string(pos) + "."));
  if (spec_.mode == Recompute::selective)
    cheap_ = std::make_unique<BufferPool>("trellis::recompute::" + name + ".cheap.");
  transient_ = std::make_unique<BufferPool>("trellis::scratch::" + name + ".transient.");
}

SharedBufferScope BlockStack::building(std::size_t i) {
  if (units_store_ != nullptr) {
    TRELLIS_REQUIRE(unit_of_.size() == i,
                    "block stack \"" + name_ + "\": blocks built out of order");
    unit_of_.push_back(units_store_->begin_unit());
  }
  BufferPool* saved =
      recomputes() ? saved_[i % static_cast<std::size_t>(spec_.every)].get() : nullptr;
  return SharedBufferScope(saved, scratch_[i % 2].get(), cheap_.get(), transient_.get());
}

void BlockStack::add(Layer& block) {
  TRELLIS_REQUIRE(!finished_ && block.capacity() == capacity_ &&
                      (blocks_.empty() || blocks_.back()->out_features() == block.in_features()),
                  "block stack \"" + name_ + "\": block \"" + block.name() + "\" does not fit");
  blocks_.push_back(&block);
  if (units_store_ != nullptr) units_store_->end_unit();
  if (recomputes() && blocks_.size() % static_cast<std::size_t>(spec_.every) == 0)
    checkpoints_.push_back(layer_buffer(
        BufferRole::own, "trellis::nn::" + block.name() + ".checkpoint",
        static_cast<std::size_t>(capacity_) * static_cast<std::size_t>(block.out_features())));
}

void BlockStack::finish() {
  TRELLIS_REQUIRE(!finished_, "block stack \"" + name_ + "\": finished twice");
  finished_ = true;
  const auto every = static_cast<std::size_t>(spec_.every);
  if (recomputes() && blocks_.size() % every != 0) {  // a shorter last group
    const Layer& last = *blocks_.back();
    checkpoints_.push_back(layer_buffer(
        BufferRole::own, "trellis::nn::" + last.name() + ".checkpoint",
        static_cast<std::size_t>(capacity_) * static_cast<std::size_t>(last.out_features())));
  }
}

ConstMatrix BlockStack::keep(std::size_t i, ConstMatrix out, int n) {
  if (!recomputes() || !ends_group(i)) return out;
  const FloatView& checkpoint = checkpoints_[i / static_cast<std::size_t>(spec_.every)];
  const int width = blocks_[i]->out_features();
  kernels::copy(kernels::flat(kernels::first_rows(out, n)),
                kernels::flat(as_matrix(checkpoint, n, width)));
  return as_matrix(checkpoint, capacity_, width);
}

ConstMatrix BlockStack::forward(ConstMatrix x, int n, const StepContext& ctx) {
  TRELLIS_REQUIRE(finished_, "block stack \"" + name_ + "\": forward before finish()");
  last_n_ = -1;
  input_ = kernels::first_rows(x, n);
  ctx_ = ctx;
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    before_forward(i);
    blocks_[i]->forward(x, n, ctx);
    x = keep(i, blocks_[i]->output(), n);
  }
  last_n_ = n;
  return x;
}

ConstMatrix BlockStack::backward(ConstMatrix dy, int n,
                                 const std::function<void(std::size_t)>& block_done) {
  TRELLIS_REQUIRE(n == last_n_, "block stack \"" + name_ + "\": backward of " + std::to_string(n) +
                                    " rows does not follow a forward of the same rows");
  const auto every = static_cast<std::size_t>(recomputes() ? spec_.every : 1);
  StepContext rerun = ctx_;
  rerun.recomputing = true;
  for (std::size_t end = blocks_.size(); end > 0;) {
    const std::size_t first = (end - 1) / every * every;
    if (recomputes()) {
      ConstMatrix x = first == 0 ? input_
                                 : as_matrix(checkpoints_[first / every - 1], n,
                                             blocks_[first - 1]->out_features());
      UnitListener* listener = units_store_ != nullptr ? units_store_->unit_listener() : nullptr;
      if (listener != nullptr) listener->recomputing(true);
      for (std::size_t i = first; i < end; ++i) {
        before_forward(i);
        blocks_[i]->forward(x, n, rerun);
        x = blocks_[i]->output();
      }
      if (listener != nullptr) listener->recomputing(false);
    }
    for (std::size_t i = end; i-- > first;) {
      before_backward(i);
      blocks_[i]->backward(dy, n);
      dy = blocks_[i]->input_grad();
      after_backward(i);
      block_done(i);
    }
    end = first;
  }
  return dy;
}

void BlockStack::before_forward(std::size_t i) const {
  if (units_store_ != nullptr && units_store_->unit_listener() != nullptr)
    units_store_->unit_listener()->before_forward(unit_of_[i]);
}

void BlockStack::before_backward(std::size_t i) const {
  if (units_store_ != nullptr && units_store_->unit_listener() != nullptr)
    units_store_->unit_listener()->before_backward(unit_of_[i]);
}

void BlockStack::after_backward(std::size_t i) const {
  if (units_store_ != nullptr && units_store_->unit_listener() != nullptr)
    units_store_->unit_listener()->after_backward(unit_of_[i]);
}

}  // namespace trellis::nn
