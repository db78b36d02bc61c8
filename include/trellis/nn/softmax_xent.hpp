// SoftmaxCrossEntropy: the classification loss as a layer-like object (kernels/softmax_xent.hpp).
//
//   logits [n, classes], labels [n] int32 in [0, classes)
//   forward:  returns {sum over rows of -log softmax(logits)[label], #correct argmax}
//   backward: dlogits = (softmax - onehot) * scale, written (=) into input_grad()
// scale is the caller's normalisation (1 / global batch for a mean over data-parallel ranks).
// forward keeps windows onto logits and labels; both must be unchanged until backward().
//
// Vocabulary-parallel (a tp group given): the logits are this rank's classes
// [class_offset, class_offset + classes) of total_classes (kernels/vocab_parallel_xent.hpp);
// forward all-reduces the row statistics over tp, and returns the same result on every rank.
#pragma once

#include "trellis/nn/tensor_parallel.hpp"

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/kernels/views.hpp"

namespace trellis::nn {

class SoftmaxCrossEntropy {
 public:
  SoftmaxCrossEntropy(int classes, int capacity);
  // classes: this rank's; total_classes: the logical count.
  SoftmaxCrossEntropy(int classes, int capacity, int class_offset, int total_classes,
                      TensorParallel tp);

  // logits: [>= n, classes]; labels: [>= n]. Throws InputError for an out-of-range label.
  kernels::XentResult forward(ConstMatrix logits, kernels::ConstLabels labels, int n);
  // Writes input_grad() rows [0, n) for the n of the last forward.
  void backward(float scale);

  int classes() const { return classes_; }
  int capacity() const { return capacity_; }
  ConstMatrix input_grad() const;  // [capacity, classes]: dlogits

 private:
  int classes_, capacity_;
  int class_offset_ = 0, total_classes_;
  TensorParallel tp_;
  FloatView dlogits_;            // [capacity * classes]
  FloatView row_max_;            // [capacity]      vocabulary-parallel only
  FloatView row_stats_;          // [3 * capacity]  sums, label logits, argmax (see kernels)
  ConstMatrix logits_;           // [n, classes] window of the last forward's logits
  kernels::ConstLabels labels_;  // [n] window of its labels
  bool has_forward_ = false;
};

}  // namespace trellis::nn
