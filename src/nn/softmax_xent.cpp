#include "trellis/nn/softmax_xent.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/vocab_parallel_xent.hpp"
#include "trellis/nn/buffer_pool.hpp"

#include <string>

namespace trellis::nn {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(int classes, int capacity)
    : SoftmaxCrossEntropy(classes, capacity, 0, classes, TensorParallel{}) {}

SoftmaxCrossEntropy::SoftmaxCrossEntropy(int classes, int capacity, int class_offset,
                                         int total_classes, TensorParallel tp)
    : classes_(classes),
      capacity_(capacity),
      class_offset_(class_offset),
      total_classes_(total_classes),
      tp_(tp) {
  TRELLIS_REQUIRE(tp.active() || (class_offset == 0 && total_classes == classes),
                  "a class slice needs a tensor-parallel group");
  if (tp.active()) {
    row_max_ = layer_buffer(BufferRole::own, "trellis::nn::xent.row_max",
                            static_cast<std::size_t>(capacity));
    row_stats_ = layer_buffer(BufferRole::own, "trellis::nn::xent.row_stats",
                              3 * static_cast<std::size_t>(capacity));
  }
  if (classes <= 0 || capacity <= 0) {
    throw Error("SoftmaxCrossEntropy: classes (" + std::to_string(classes) + ") and capacity (" +
                std::to_string(capacity) + ") must be positive");
  }
  dlogits_ = layer_buffer(BufferRole::own, "trellis::nn::xent.dlogits",
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
  if (!tp_.active()) return kernels::softmax_xent_forward(logits_, labels_);
  const auto rows = static_cast<std::size_t>(n);
  const kernels::Vector row_max(row_max_.data(), rows), stats(row_stats_.data(), 3 * rows);
  kernels::vp_xent_row_max(logits_, row_max);
  tp_.comm->all_reduce(row_max.data(), rows, ReduceOp::max);
  kernels::vp_xent_row_stats(logits_, labels_, row_max, class_offset_, total_classes_, stats);
  tp_.comm->all_reduce(stats.data(), 2 * rows, ReduceOp::sum);
  tp_.comm->all_reduce(stats.data() + 2 * rows, rows, ReduceOp::min);
  return kernels::vp_xent_result(labels_, row_max, stats, total_classes_);
}

void SoftmaxCrossEntropy::backward(float scale) {
  TRELLIS_REQUIRE(has_forward_, "SoftmaxCrossEntropy::backward before forward");
  const int n = static_cast<int>(logits_.extent(0));
  const Matrix dlogits = as_matrix(dlogits_, n, classes_);
  if (!tp_.active()) {
    kernels::softmax_xent_backward(logits_, labels_, scale, dlogits);
    return;
  }
  // row_max_ and the sums still hold forward's reduced values for these rows.
  const auto rows = static_cast<std::size_t>(n);
  kernels::vp_xent_backward(logits_, labels_, kernels::ConstVector(row_max_.data(), rows),
                            kernels::ConstVector(row_stats_.data(), 3 * rows), class_offset_, scale,
                            dlogits);
}

ConstMatrix SoftmaxCrossEntropy::input_grad() const {
  return as_matrix(dlogits_, capacity_, classes_);
}

}  // namespace trellis::nn
