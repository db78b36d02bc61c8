#include "trellis/nn/mlp_layer.hpp"

#include "trellis/core/error.hpp"

namespace trellis::nn {

MlpLayer::MlpLayer(std::unique_ptr<Linear> fc, std::unique_ptr<Dropout> drop)
    : Layer(fc->name(), fc->in_features(), fc->out_features(), fc->capacity(),
            OwnBuffers{false, false, BufferRole::saved}),
      fc_(std::move(fc)),
      drop_(std::move(drop)) {
  TRELLIS_REQUIRE(drop_ == nullptr || (drop_->in_features() == fc_->out_features() &&
                                       drop_->capacity() == fc_->capacity()),
                  "mlp layer " + name() + ": dropout of another shape");
  share_output_of(drop_ ? static_cast<const Layer&>(*drop_) : *fc_);
  share_input_grad_of(*fc_);
  set_input_grad_needed(fc_->input_grad_needed());
}

void MlpLayer::forward(ConstMatrix input, int n, const StepContext& ctx) {
  const ConstMatrix x = begin_forward(input, n);
  fc_->forward(x, n, ctx);
  if (drop_) drop_->forward(fc_->output(), n, ctx);
}

void MlpLayer::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  if (!drop_) {
    fc_->backward(dy, n);
    return;
  }
  drop_->backward(dy, n);
  fc_->backward(drop_->input_grad(), n);
}

void MlpLayer::for_each_part(const std::function<void(Layer&)>& f) {
  f(*fc_);
  if (drop_) f(*drop_);
}

}  // namespace trellis::nn
