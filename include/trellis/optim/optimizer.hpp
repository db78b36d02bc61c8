// Optimizers over one flat parameter buffer and its flat gradient buffer.
//
// Update rules follow torch.optim's single-tensor path (foreach=False): same formulas, same
// order of float operations, same defaults, so a step can be checked element by element
// against PyTorch (hyperparameters are floats here, Python doubles there: last-bit noise).
// Every state buffer is allocated when the optimizer is built; step() launches kernels and
// allocates nothing.
//
// Fusion: each step is ONE pass over params, grads and the state buffers: weight decay, the
// moments, bias correction and the update in one loop, every per-step scalar (lr, bias
// corrections, the clip coefficient as grad_scale) computed once on the host. The decay mask
// is read once, when the optimizer is built, into runs of equal flag (decay_runs()); the host
// loop runs once per run with decay compiled in or out, so masking costs no per-element work.
//
// Indexing: params, grads, the decay mask and every state buffer share one index space of
// numel elements. step() over [begin, end) touches only that range of all of them. ZeRO-1
// wants state only for its shard: build the optimizer with numel = shard size and pass
// slice()s of params/grads/mask instead.
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/core/param_window.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

enum class OptimizerType { sgd, adam, adamw, rmsprop };

// optim.type's names, the one list (the config table, the messages and the tests read it).
const std::vector<std::pair<const char*, OptimizerType>>& optimizer_type_names();
const char* optimizer_type_name(OptimizerType type);
// ConfigError naming optim.type, the value and the names allowed.
OptimizerType parse_optimizer_type(const std::string& name);

// The optimizer's hyperparameters: the optim.* section of the configuration (train/ adds
// optim.lr and optim.clip_norm on top). No defaults here: the config table is the only place
// they live, so a spec built by hand sets every field its type uses.
struct OptimizerSpec {
  OptimizerType type = OptimizerType::sgd;
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
  Optimizer(std::size_t numel, ConstMaskView decay_mask);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // A run [begin, end) of elements whose decay mask is all set (decay) or all clear.
  struct DecayRun {
    std::size_t begin = 0, end = 0;
    bool decay = false;
  };

  // One optimizer step over the whole buffer. params and grads are [numel].
  void step(FloatView params, ConstFloatView grads, float lr) {
    step(params, grads, lr, 1.0f, 0, numel_);
  }
  // The same with every gradient multiplied by grad_scale as it is read: the clip coefficient
  // (clip_coefficient()), giving the same floats as scaling grads in place first, one pass
  // fewer. grads are left as they are.
  void step(FloatView params, ConstFloatView grads, float lr, float grad_scale) {
    step(params, grads, lr, grad_scale, 0, numel_);
  }
  // One optimizer step over elements [begin, end) only. Counts as a full step (bias
  // correction uses the count), so call it once per training step, not once per bucket.
  void step(FloatView params, ConstFloatView grads, float lr, std::size_t begin, std::size_t end) {
    step(params, grads, lr, 1.0f, begin, end);
  }
  void step(FloatView params, ConstFloatView grads, float lr, float grad_scale, std::size_t begin,
            std::size_t end);
  // One step over windows that cover [0, numel()) in order, each with its own parameters
  // (core/param_window.hpp): grads [numel].
  void step(const std::vector<ParamWindow>& windows, ConstFloatView grads, float lr,
            float grad_scale);

  virtual std::string name() const = 0;  // "sgd", "adam", "adamw", "rmsprop"
  virtual NamedState state() = 0;        // views of the live buffers: write them to restore

  // Completed steps; restored from a checkpoint together with state().
  std::int64_t step_count() const { return step_count_; }
  void set_step_count(std::int64_t count);
  std::size_t numel() const { return numel_; }
  // The decay mask as runs covering [0, numel) in order, adjacent runs differing in flag.
  const std::vector<DecayRun>& decay_runs() const { return decay_runs_; }

  // The kernel behind step(), run with step_count() already advanced. Called by step()
  // only; public because nvcc rejects device lambdas inside non-public member functions.
  virtual void update(FloatView params, ConstFloatView grads, float lr, float grad_scale,
                      std::size_t begin, std::size_t end) = 0;

 protected:
  // Calls f(run_begin, run_end, decay) for each part of a decay run inside [begin, end), in
  // order. Runs are few (two per layer at most), so a linear scan costs nothing next to the
  // elements.
  template <class F>
  void for_each_decay_run(std::size_t begin, std::size_t end, F&& f) const {
    for (const DecayRun& run : decay_runs_) {
      const std::size_t lo = run.begin > begin ? run.begin : begin;
      const std::size_t hi = run.end < end ? run.end : end;
      if (lo < hi) f(lo, hi, run.decay);
    }
  }

  std::size_t numel_;
  ConstMaskView decay_mask_;          // [numel]; weight decay applies where the mask is non-zero
  std::vector<DecayRun> decay_runs_;  // the mask's runs, for the host loops
  std::int64_t step_count_ = 0;
};

// Builds the optimizer named by spec.type; decay_mask is [numel] (1 = decay, 0 = not).
// Throws ConfigError naming the offending optim.* key.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, std::size_t numel,
                                          ConstMaskView decay_mask);

// Checks the fields spec.type uses; throws ConfigError naming the key.
void validate_optimizer_spec(const OptimizerSpec& spec);

// Float buffers of state per parameter that make_optimizer() allocates for `spec` (what the
// memory estimate counts).
int optimizer_state_buffers(const OptimizerSpec& spec);

}  // namespace trellis
