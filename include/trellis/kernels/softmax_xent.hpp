// Fused, numerically stable softmax + cross-entropy over the rows of a logits matrix.
//
// Per row r with logits z [classes] and label y:
//   loss_r = log(sum_j exp(z_j - max z)) + max z - z_y
//   dz_j   = (softmax(z)_j - [j == y]) * scale
// The softmax is never stored: backward recomputes it from the logits (one extra exp per
// element, no [n, classes] probability buffer).
#pragma once

#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels {

struct XentResult {
  double loss_sum = 0.0;     // sum over rows of loss_r (not the mean: ranks add these up)
  std::int64_t correct = 0;  // rows whose argmax (first index among ties) equals the label
};

// logits: [n, classes]   labels: [>= n], each in [0, classes)
// A label outside [0, classes) throws trellis::InputError naming its value and row (the row of
// this call, 0-based); the check rides on the same reduction, so it costs nothing extra.
// Synchronous: returns host values (fences the execution space).
XentResult softmax_xent_forward(ConstMatrix logits, ConstLabels labels);

// Throws the InputError for labels(row) outside [0, classes) (reads the one label to host).
[[noreturn]] void throw_bad_label(ConstLabels labels, std::int64_t row, std::int64_t classes);

// dlogits = (softmax(logits) - onehot(labels)) * scale, written (=).
// logits, dlogits: [n, classes]   labels: [>= n]
// scale is the caller's normalisation, e.g. 1 / global_batch, so that summing gradients over
// data-parallel ranks gives the gradient of the global mean loss. Rows with an out-of-range
// label (which forward rejects) get plain softmax * scale; nothing is read out of bounds.
void softmax_xent_backward(ConstMatrix logits, ConstLabels labels, float scale, Matrix dlogits);

}  // namespace trellis::kernels
