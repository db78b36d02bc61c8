#include "trellis/nn/tied_head.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/gemm.hpp"

namespace trellis::nn {

TiedHead::TiedHead(ParameterStore& store, const std::string& name, std::size_t weight_index,
                   int d_model, int local_vocab, int capacity_rows, TensorParallel tp)
    : Layer(name, d_model, local_vocab, capacity_rows),
      store_(&store),
      weight_(weight_index),
      tp_(tp),
      x16_(store.autocast(), name + ".x16",
           static_cast<std::size_t>(capacity_rows) * static_cast<std::size_t>(d_model),
           BufferRole::saved),
      dl16_(store.autocast(), name + ".dl16",
            static_cast<std::size_t>(capacity_rows) * static_cast<std::size_t>(local_vocab),
            BufferRole::scratch) {}

void TiedHead::forward(ConstMatrix input, int n, const StepContext&) {
  const ConstMatrix x = begin_forward(input, n);  // [n, d]
  const Matrix logits = output_rows(n);           // [n, V/tp]
  kernels::gemm(false, true, x16_.round(x), store_->compute_operand(weight_), 0.0f, logits);
  round_in_place(store_->autocast(), logits);
}

void TiedHead::backward(ConstMatrix output_grad, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  const kernels::GemmOperand x = x16_.last();  // as forward's GEMM read it
  const kernels::GemmOperand dl = dl16_.round(dy);
  kernels::gemm(true, false, dl, x, 1.0f, store_->grad_matrix(weight_));  // dW += dl^T x
  const Matrix dx = input_grad_rows(n);
  kernels::gemm(false, false, dl, store_->compute_operand(weight_), 0.0f, dx);  // dx = dl W
  // Each tp rank's vocabulary slice contributes a part of dx.
  if (tp_.active()) tp_.comm->all_reduce(dx.data(), dx.size(), ReduceOp::sum);
  round_in_place(store_->autocast(), dx);
}

std::int64_t TiedHead::flops_per_sample() const {
  return 6 * static_cast<std::int64_t>(in_features()) * out_features();
}

}  // namespace trellis::nn
