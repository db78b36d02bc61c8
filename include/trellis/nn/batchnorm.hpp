// BatchNorm2d: per-channel batch normalisation of images flattened into rows (NCHW, or the
// channel-blocked layout of the convolution before it: kernels/channel_layout.hpp), PyTorch's
// nn.BatchNorm2d(C, eps, momentum) (affine, tracking running statistics).
//
//   x [n, C*H*W] -> y [n, C*H*W]          plane = H*W
//   gamma "<name>.weight" [C] (init 1, no decay)    beta "<name>.bias" [C] (init 0, no decay)
// Training (ctx.training), statistics over the N = n*plane values of each channel (over all
// ranks of `sync` when given):
//   mean = sum x / N,  var = sum x^2 / N - mean^2 (biased),  xhat = (x - mean) / sqrt(var + eps)
//   y = gamma * xhat + beta
//   running_mean = (1 - momentum) running_mean + momentum mean
//   running_var  = (1 - momentum) running_var  + momentum var * N / (N - 1)   (unbiased)
// Eval: the same with mean, var = running_mean, running_var, and no update.
// Backward (mode of the last forward):
//   dbeta += sum dy,  dgamma += sum dy * xhat      (this rank's rows only: the DP gradient
//                                                   all-reduce adds the other ranks' shares)
//   training: dx = gamma / sqrt(var + eps) * (dy - S1 / N - xhat * S2 / N)   (=)
//             with S1 = sum dy, S2 = sum dy * xhat over the same N values as the statistics
//   eval:     dx = gamma / sqrt(var + eps) * dy
// All reductions are in double. The running statistics are a non-trainable buffer [2C] owned by
// the layer (not in the ParameterStore), exposed for checkpoints and tests.
//
// relu_after: a ReLU follows the norm inside this layer, y = max(gamma * xhat + beta, 0), and
// backward takes dy as the ReLU output's gradient (kernels/batchnorm.hpp: bit for bit the two
// layers apart, without the ReLU's passes and buffers).
//
// Synchronised statistics (SyncBatchNorm): with a communicator, forward all-reduces the
// per-channel [sum x, sum x^2] and the count N in one MPI_Allreduce, and backward all-reduces
// [S1, S2] in another, so a data-parallel run on slices of a batch computes what one rank
// computes on the whole batch. Every rank of `sync` must call forward/backward together (n may
// differ, even be 0). Buffers pass through host memory (a mirror when the Kokkos memory space
// is not host-accessible). The communicator must outlive the layer.
#pragma once

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/channel_layout.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <string>

namespace trellis::nn {

class BatchNorm2d : public Layer {
 public:
  // Registers "<name>.weight" and "<name>.bias" in `store` (before store.finalize()).
  // sync: statistics over all ranks of this communicator (nullptr: this rank's rows only).
  // channel_block: the layout of x and y (kernels/channel_layout.hpp; 1 = NCHW).
  BatchNorm2d(ParameterStore& store, const std::string& name, int channels, int height, int width,
              int capacity, float momentum = 0.1f, float eps = 1e-5f, const MpiComm* sync = nullptr,
              int channel_block = 1, bool relu_after = false);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // backward when a ReLU outside this layer, y = max(this output + s, 0) (a residual block's
  // add: nn/residual.hpp), follows it: output_grad is dL/dy, and the kernels take it masked by
  // [relu_output > 0] (relu_output: [>= n, features], that y), so no masked copy is made.
  void backward_through_relu(ConstMatrix output_grad, ConstMatrix relu_output, int n);

  int channels() const { return channels_; }
  int plane() const { return plane_; }
  kernels::ChannelLayout layout() const { return {plane_, channel_block_}; }
  bool relu_after() const { return relu_after_; }
  float momentum() const { return momentum_; }
  float eps() const { return eps_; }
  const MpiComm* sync() const { return sync_; }
  std::size_t weight_index() const { return weight_; }
  std::size_t bias_index() const { return bias_; }

  // Running statistics [C] each (init mean 0, var 1), writable to restore a checkpoint.
  kernels::Vector running_mean() const;
  kernels::Vector running_var() const;
  // Both as one buffer [2C]: mean, then var.
  kernels::Vector running_stats() const;
  // Values per channel the last training forward normalised over (N above, all ranks).
  double batch_count() const { return count_; }

 private:
  // Sums the first `values` doubles of sums_ over sync_ in place (needs sync_). With
  // local_count >= 0 it rides along as element `values` and the global count is returned.
  double allreduce_sums(int values, double local_count);
  // backward with dy masked by [mask_rows > 0] (empty: not masked).
  void backward_masked(ConstMatrix output_grad, ConstMatrix mask_rows, int n);

  using DoubleView = Kokkos::View<double*, MemSpace>;
  using HostDoubleView = Kokkos::View<double*, HostSpace>;

  ParameterStore* store_;
  std::size_t weight_, bias_;
  int channels_, plane_, channel_block_;
  bool relu_after_;
  float momentum_, eps_;
  const MpiComm* sync_;
  FloatView running_;         // [2C]: running mean, running var
  FloatView rerun_running_;   // [2C]: what a recomputed forward updates instead
  DoubleView sums_;           // [2C + 1]: reductions (sum x, sum x^2 | S1, S2), then count
  DoubleView stats_;          // [2C]: mean, 1 / sqrt(var + eps) used by the last forward
  HostDoubleView host_sums_;  // mirror of sums_ for MPI (sums_ itself when host-accessible)
  double count_ = 0.0;        // N of the last training forward
  bool training_ = true;      // mode of the last forward
};

}  // namespace trellis::nn
