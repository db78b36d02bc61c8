// Optimizers over one flat parameter buffer and its flat gradient buffer.
//
// Update rules follow torch.optim's single-tensor path (foreach=False): same formulas, same
// order of float operations, same defaults, so a step can be checked element by element
// against PyTorch (hyperparameters are floats here, Python doubles there: last-bit noise).
// Every state buffer is allocated when the optimizer is built; step() launches kernels and
// allocates nothing.
//
// Indexing: params, grads, the decay mask and every state buffer share one index space of
// numel elements. step() over [begin, end) touches only that range of all of them. ZeRO-1
// wants state only for its shard: build the optimizer with numel = shard size and pass
// slice()s of params/grads/mask instead.
#pragma once

#include "trellis/core/kokkos_types.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

// The optimizer's hyperparameters: the optim.* section of the configuration (train/ adds
// optim.lr and optim.clip_norm on top). No defaults here: the config table is the only place
// they live, so a spec built by hand sets every field its type uses.
struct OptimizerSpec {
  std::string type;        // "sgd" | "adam" | "adamw" | "rmsprop"
  float momentum = 0;      // sgd, rmsprop
  bool nesterov = false;   // sgd; needs momentum > 0
  float weight_decay = 0;  // coupled L2 (sgd/adam/rmsprop), decoupled (adamw)
  float beta1 = 0;         // adam, adamw
  float beta2 = 0;         // adam, adamw
  float eps = 0;           // adam, adamw, rmsprop
  float alpha = 0;         // rmsprop smoothing of the squared gradient
};

// Named state buffer, each [numel], for checkpoints ("exp_avg", "momentum_buffer", ...).
using NamedState = std::vector<std::pair<std::string, FloatView>>;

// Concrete classes (Sgd, Adam, RmsProp) do not validate their spec; make_optimizer() does.
class Optimizer {
 public:
  Optimizer(std::size_t numel, ConstFloatView decay_mask);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One optimizer step over the whole buffer. params and grads are [numel].
  void step(FloatView params, ConstFloatView grads, float lr) {
    step(params, grads, lr, 0, numel_);
  }
  // One optimizer step over elements [begin, end) only. Counts as a full step (bias
  // correction uses the count), so call it once per training step, not once per bucket.
  void step(FloatView params, ConstFloatView grads, float lr, std::size_t begin, std::size_t end);

  virtual std::string name() const = 0;  // "sgd", "adam", "adamw", "rmsprop"
  virtual NamedState state() = 0;        // views of the live buffers: write them to restore

  // Completed steps; restored from a checkpoint together with state().
  std::int64_t step_count() const { return step_count_; }
  void set_step_count(std::int64_t count);
  std::size_t numel() const { return numel_; }

  // The kernel behind step(), run with step_count() already advanced. Called by step()
  // only; public because nvcc rejects device lambdas inside non-public member functions.
  virtual void update(FloatView params, ConstFloatView grads, float lr, std::size_t begin,
                      std::size_t end) = 0;

 protected:
  std::size_t numel_;
  ConstFloatView decay_mask_;  // [numel]; weight decay applies where the mask is non-zero
  std::int64_t step_count_ = 0;
};

// Builds the optimizer named by spec.type; decay_mask is [numel] (1 = decay, 0 = not).
// Throws ConfigError naming the offending optim.* key.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, std::size_t numel,
                                          ConstFloatView decay_mask);

// Checks the fields spec.type uses; throws ConfigError naming the key.
void validate_optimizer_spec(const OptimizerSpec& spec);

}  // namespace trellis
