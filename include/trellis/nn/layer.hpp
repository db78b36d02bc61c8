// Layer: one step of a model with an explicit forward/backward pair (no autograd tape).
//
// Buffers: each layer owns its output [capacity, out_features] and its input gradient
// [capacity, in_features], allocated once at construction. A call handles n <= capacity rows
// and uses rows [0, n) of these buffers; nothing is allocated per call.
//
// Gradient rule (DESIGN.md): backward ADDS (+=) into the parameter gradients in the
// ParameterStore's flat grad buffer, so micro-batches accumulate without extra buffers, and
// WRITES (=) the input gradient, which belongs to this call alone.
//
// forward() keeps a window onto its input (not a copy): the caller must leave the input rows
// unchanged until the matching backward(). backward(n) must follow a forward(n).
#pragma once

#include <functional>

#include "trellis/core/kokkos_types.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace trellis::nn {

struct StepContext {
  std::uint64_t seed = 0;         // run seed (dropout masks)
  std::int64_t step = 0;          // optimizer step: a fresh dropout mask per step
  std::int64_t first_sample = 0;  // global index, within the global batch, of row 0 of this call
  bool training = true;           // false: dropout is the identity
  // A forward rerun in backward by activation recomputation (nn/block_stack.hpp): it must
  // reproduce the first one and change no state (BatchNorm's running statistics).
  bool recomputing = false;
};

// Sees a layer's forward inputs (Layer::set_input_observer).
class InputObserver {
 public:
  virtual ~InputObserver() = default;
  virtual void observe(ConstMatrix rows) = 0;  // [n, in_features]
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // input: [>= n, in_features], rows [0, n) used. Writes output() rows [0, n).
  virtual void forward(ConstMatrix input, int n, const StepContext& ctx) = 0;
  // output_grad: [>= n, out_features], n as in the last forward. Writes input_grad() rows
  // [0, n) (=) and adds into parameter gradients (+=).
  virtual void backward(ConstMatrix output_grad, int n) = 0;

  // FLOPs per sample (row) for one forward plus one backward; 0 for cheap element-wise layers.
  virtual std::int64_t flops_per_sample() const { return 0; }
  // Composite layers (a residual block, a transformer block) call f on each layer they are
  // made of, in forward order; nn::visit_layers walks a whole tree. Used to find the layers
  // that int8 inference replaces (int8/quantize_layer.hpp).
  virtual void for_each_part(const std::function<void(Layer&)>& f) { (void)f; }

  const std::string& name() const { return name_; }
  int in_features() const { return in_features_; }
  int out_features() const { return out_features_; }
  int capacity() const { return capacity_; }

  ConstMatrix output() const;      // [capacity, out_features]; empty where the layer keeps its
                                   // output in 16 bits (nn/linear.hpp: output_half)
  ConstMatrix input_grad() const;  // [capacity, in_features]

  // Whether backward must write input_grad() (default true). A model switches it off for its
  // first layer when that layer's input is data, as nobody reads the gradient there; a layer
  // that honours it (Linear: no dx GEMM) then leaves input_grad() unwritten, others may still
  // write it. Set at model build time; pipeline stages after the first keep it, since their
  // input gradient is sent upstream.
  void set_input_grad_needed(bool needed) { input_grad_needed_ = needed; }
  bool input_grad_needed() const { return input_grad_needed_; }

  // Shows `observer` the input rows [0, n) of every forward (nullptr: none); not owned.
  // Int8 calibration watches the inputs of the layers it quantizes this way
  // (int8/calibration.hpp); no layer needs to know.
  void set_input_observer(InputObserver* observer) { observer_ = observer; }

 protected:
  // Which of its two buffers a layer allocates: a composite layer that takes a sub-layer's
  // (share_output_of, share_input_grad_of) allocates none for it. output_role: the output's
  // role (nn/buffer_pool.hpp), cheap for an output recomputable from what backward keeps.
  struct OwnBuffers {
    bool output, input_grad;
    BufferRole output_role;
  };
  Layer(std::string name, int in_features, int out_features, int capacity)
      : Layer(std::move(name), in_features, out_features, capacity,
              OwnBuffers{true, true, BufferRole::saved}) {}
  Layer(std::string name, int in_features, int out_features, int capacity, OwnBuffers own);
  // An inference-only layer (int8/): it owns no input gradient (input_grad() is empty), and
  // its backward throws.
  struct InferenceOnly {};
  Layer(std::string name, int in_features, int out_features, int capacity, InferenceOnly);

  // Checks a forward call, remembers its input for backward, returns rows [0, n) of input.
  ConstMatrix begin_forward(const ConstMatrix& input, int n);
  // The same for an input that is not an fp32 matrix (a Linear reading 16-bit words): checks
  // n and remembers it; saved_input() is then empty.
  void begin_forward_rows(int n);
  // Checks a backward call against the last forward, returns rows [0, n) of output_grad.
  ConstMatrix begin_backward(const ConstMatrix& output_grad, int n) const;

  // A composite layer whose output (input gradient) is exactly a sub-layer's, unchanged, makes
  // the sub-layer's buffer its own instead of copying it on every call. Same shape required;
  // call at construction (with OwnBuffers saying so: nothing is allocated for it).
  void share_output_of(const Layer& inner);
  void share_input_grad_of(const Layer& inner);
  // A composite layer that knows when its parts' input gradients are dead lets parts whose
  // gradients are never alive at once write them into one buffer it owns: parts built while an
  // InputGradsFromOwner scope is alive allocate none, and the composite gives each one a window
  // onto `buffer` (at least part.capacity() * part.in_features() floats; empty under a census)
  // before its first backward.
  void lend_input_grad_to(Layer& part, const FloatView& buffer) const;

  ConstMatrix saved_input() const { return saved_input_; }  // [n, in_features] of last forward
  Matrix output_rows(int n) const;                          // [n, out_features]
  Matrix input_grad_rows(int n) const;                      // [n, in_features]

 private:
  std::string name_;
  int in_features_, out_features_, capacity_;
  FloatView output_;         // [capacity * out_features]
  FloatView input_grad_;     // [capacity * in_features]
  ConstMatrix saved_input_;  // [n, in_features] window onto the caller's input (not owned)
  int forward_rows_ = 0;     // n of the last forward
  bool has_forward_ = false;
  bool input_grad_needed_ = true;
  bool input_grad_from_owner_ = false;  // built in an InputGradsFromOwner scope, not yet lent
  InputObserver* observer_ = nullptr;
};

// While alive, layers constructed on this thread allocate no input gradient: the composite
// building them lends each one a buffer (Layer::lend_input_grad_to) before its first backward,
// and a backward without one throws. Scopes nest; per thread, like SharedBufferScope.
class InputGradsFromOwner {
 public:
  InputGradsFromOwner();
  ~InputGradsFromOwner();
  InputGradsFromOwner(const InputGradsFromOwner&) = delete;
  InputGradsFromOwner& operator=(const InputGradsFromOwner&) = delete;

 private:
  bool previous_;
};

// f(layer), then the same for each of its parts, depth first in forward order.
inline void visit_layers(Layer& layer, const std::function<void(Layer&)>& f) {
  f(layer);
  layer.for_each_part([&](Layer& part) { visit_layers(part, f); });
}

}  // namespace trellis::nn
