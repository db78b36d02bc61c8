// SoftmaxCrossEntropy: the classification loss as a layer-like object (kernels/softmax_xent.hpp).
//
//   logits [n, classes], labels [n] int32 in [0, classes)
//   forward:  returns {sum over rows of -log softmax(logits)[label], #correct argmax}
//   backward: dlogits = (softmax - onehot) * scale, written (=) into input_grad()
// scale is the caller's normalisation (1 / global batch for a mean over data-parallel ranks).
// forward keeps windows onto logits and labels; both must be unchanged until backward().
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::nn {

class SoftmaxCrossEntropy {
 public:
  SoftmaxCrossEntropy(int classes, int capacity);

  // logits: [>= n, classes]; labels: [>= n]. Throws InputError for an out-of-range label.
  kernels::XentResult forward(ConstMatrix logits, kernels::ConstLabels labels, int n);
  // Writes input_grad() rows [0, n) for the n of the last forward.
  void backward(float scale);

  int classes() const { return classes_; }
  int capacity() const { return capacity_; }
  ConstMatrix input_grad() const;  // [capacity, classes]: dlogits

 private:
  int classes_, capacity_;
  FloatView dlogits_;            // [capacity * classes]
  ConstMatrix logits_;           // [n, classes] window of the last forward's logits
  kernels::ConstLabels labels_;  // [n] window of its labels
  bool has_forward_ = false;
};

}  // namespace trellis::nn
