#include "trellis/nn/layer.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <utility>

namespace trellis::nn {

namespace {

thread_local bool input_grads_from_owner = false;

}  // namespace

InputGradsFromOwner::InputGradsFromOwner() : previous_(input_grads_from_owner) {
  input_grads_from_owner = true;
}

InputGradsFromOwner::~InputGradsFromOwner() { input_grads_from_owner = previous_; }

Layer::Layer(std::string name, int in_features, int out_features, int capacity, OwnBuffers own)
    : name_(std::move(name)),
      in_features_(in_features),
      out_features_(out_features),
      capacity_(capacity) {
  if (in_features <= 0 || out_features <= 0 || capacity <= 0) {
    throw Error("layer \"" + name_ + "\": in_features (" + std::to_string(in_features) +
                "), out_features (" + std::to_string(out_features) + ") and capacity (" +
                std::to_string(capacity) + ") must be positive");
  }
  const auto cap = static_cast<std::size_t>(capacity);
  if (own.output)
    output_ = layer_buffer(own.output_role, "trellis::nn::" + name_ + ".output",
                           cap * static_cast<std::size_t>(out_features));
  input_grad_from_owner_ = own.input_grad && input_grads_from_owner;
  if (own.input_grad && !input_grad_from_owner_)
    input_grad_ = layer_buffer(BufferRole::scratch, "trellis::nn::" + name_ + ".input_grad",
                               cap * static_cast<std::size_t>(in_features));
}

Layer::Layer(std::string name, int in_features, int out_features, int capacity, InferenceOnly)
    : Layer(std::move(name), in_features, out_features, 1) {
  // Checked above with capacity 1 (nothing read yet); the output at full capacity, no
  // input gradient.
  if (capacity <= 0)
    throw Error("layer \"" + name_ + "\": capacity (" + std::to_string(capacity) +
                ") must be positive");
  capacity_ = capacity;
  output_ = FloatView("trellis::nn::" + name_ + ".output",
                      static_cast<std::size_t>(capacity) * static_cast<std::size_t>(out_features));
  input_grad_ = FloatView();
}

void Layer::share_output_of(const Layer& inner) {
  TRELLIS_REQUIRE(inner.out_features_ == out_features_ && inner.capacity_ == capacity_,
                  "layer \"" + name_ + "\": cannot share the output of \"" + inner.name_ + "\"");
  output_ = inner.output_;
}

void Layer::share_input_grad_of(const Layer& inner) {
  TRELLIS_REQUIRE(
      inner.in_features_ == in_features_ && inner.capacity_ == capacity_,
      "layer \"" + name_ + "\": cannot share the input gradient of \"" + inner.name_ + "\"");
  input_grad_ = inner.input_grad_;
}

void Layer::lend_input_grad_to(Layer& part, const FloatView& buffer) const {
  const std::size_t floats =
      static_cast<std::size_t>(part.capacity_) * static_cast<std::size_t>(part.in_features_);
  TRELLIS_REQUIRE(part.input_grad_from_owner_,
                  "layer \"" + name_ + "\": \"" + part.name_ +
                      "\" was not built to take its input gradient from its owner");
  if (buffer.size() == 0) return;  // sized under a census: never run
  TRELLIS_REQUIRE(buffer.size() >= floats, "layer \"" + name_ + "\": a buffer of " +
                                               std::to_string(buffer.size()) + " floats for \"" +
                                               part.name_ + "\"'s input gradient of " +
                                               std::to_string(floats));
  part.input_grad_ = Kokkos::subview(buffer, std::make_pair(std::size_t{0}, floats));
  part.input_grad_from_owner_ = false;
}

ConstMatrix Layer::output() const {
  if (output_.size() == 0) return {};  // kept in 16 bits by the layer itself
  return as_matrix(output_, capacity_, out_features_);
}

ConstMatrix Layer::input_grad() const {
  if (input_grad_.size() == 0) return {};  // an inference-only layer
  return as_matrix(input_grad_, capacity_, in_features_);
}

Matrix Layer::output_rows(int n) const { return as_matrix(output_, n, out_features_); }

Matrix Layer::input_grad_rows(int n) const { return as_matrix(input_grad_, n, in_features_); }

void Layer::begin_forward_rows(int n) {
  if (n < 0 || n > capacity_) {
    throw Error("layer \"" + name_ + "\": forward of " + std::to_string(n) + " rows, capacity is " +
                std::to_string(capacity_));
  }
  TRELLIS_REQUIRE(observer_ == nullptr,
                  "layer \"" + name_ + "\": an input observer sees fp32 inputs only");
  saved_input_ = ConstMatrix();
  forward_rows_ = n;
  has_forward_ = true;
}

ConstMatrix Layer::begin_forward(const ConstMatrix& input, int n) {
  if (n < 0 || n > capacity_) {
    throw Error("layer \"" + name_ + "\": forward of " + std::to_string(n) + " rows, capacity is " +
                std::to_string(capacity_));
  }
  if (input.extent(1) != static_cast<std::size_t>(in_features_) ||
      input.extent(0) < static_cast<std::size_t>(n)) {
    throw Error("layer \"" + name_ + "\": forward input " + kernels::extents_string(input) +
                " for " + std::to_string(n) + " rows of " + std::to_string(in_features_) +
                " features");
  }
  saved_input_ = kernels::first_rows(input, n);
  forward_rows_ = n;
  has_forward_ = true;
  if (observer_ != nullptr) observer_->observe(saved_input_);
  return saved_input_;
}

ConstMatrix Layer::begin_backward(const ConstMatrix& output_grad, int n) const {
  if (input_grad_from_owner_)
    throw Error("layer \"" + name_ +
                "\": backward before the layer that owns it lent it an input-gradient buffer");
  if (!has_forward_ || n != forward_rows_) {
    throw Error("layer \"" + name_ + "\": backward of " + std::to_string(n) +
                " rows does not follow a forward of the same rows" +
                (has_forward_ ? " (last forward: " + std::to_string(forward_rows_) + ")"
                              : std::string(" (no forward yet)")));
  }
  if (output_grad.extent(1) != static_cast<std::size_t>(out_features_) ||
      output_grad.extent(0) < static_cast<std::size_t>(n)) {
    throw Error("layer \"" + name_ + "\": backward output_grad " +
                kernels::extents_string(output_grad) + " for " + std::to_string(n) + " rows of " +
                std::to_string(out_features_) + " features");
  }
  return kernels::first_rows(output_grad, n);
}

}  // namespace trellis::nn
