#include "trellis/nn/softmax_xent.hpp"

#include "trellis/core/error.hpp"

#include <string>

namespace trellis::nn {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(int classes, int capacity)
    : classes_(classes), capacity_(capacity) {
  if (classes <= 0 || capacity <= 0) {
    throw Error("SoftmaxCrossEntropy: classes (" + std::to_string(classes) + ") and capacity (" +
                std::to_string(capacity) + ") must be positive");
  }
  dlogits_ = FloatView("trellis::nn::xent.dlogits",
                       static_cast<std::size_t>(capacity) * static_cast<std::size_t>(classes));
}

kernels::XentResult SoftmaxCrossEntropy::forward(ConstMatrix logits, kernels::ConstLabels labels,
                                                 int n) {
  if (n < 0 || n > capacity_) {
    throw Error("SoftmaxCrossEntropy: forward of " + std::to_string(n) + " rows, capacity is " +
                std::to_string(capacity_));
  }
  if (logits.extent(1) != static_cast<std::size_t>(classes_) ||
      logits.extent(0) < static_cast<std::size_t>(n) ||
      labels.extent(0) < static_cast<std::size_t>(n)) {
    throw Error("SoftmaxCrossEntropy: logits " + kernels::extents_string(logits) + " and labels " +
                kernels::extents_string(labels) + " for " + std::to_string(n) + " rows of " +
                std::to_string(classes_) + " classes");
  }
  logits_ = kernels::first_rows(logits, n);
  labels_ = kernels::ConstLabels(labels.data(), static_cast<std::size_t>(n));
  has_forward_ = true;
  return kernels::softmax_xent_forward(logits_, labels_);
}

void SoftmaxCrossEntropy::backward(float scale) {
  TRELLIS_REQUIRE(has_forward_, "SoftmaxCrossEntropy::backward before forward");
  const int n = static_cast<int>(logits_.extent(0));
  kernels::softmax_xent_backward(logits_, labels_, scale, as_matrix(dlogits_, n, classes_));
}

ConstMatrix SoftmaxCrossEntropy::input_grad() const {
  return as_matrix(dlogits_, capacity_, classes_);
}

}  // namespace trellis::nn
