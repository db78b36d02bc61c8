#include "trellis/nn/batchnorm.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/kernels/batchnorm.hpp"
#include "trellis/kernels/vector_ops.hpp"

#include <mpi.h>

#include <type_traits>

namespace trellis::nn {

namespace {

int checked_features(const std::string& name, int channels, int height, int width) {
  if (channels <= 0 || height <= 0 || width <= 0) {
    throw Error("batchnorm \"" + name + "\": [C, H, W] = [" + std::to_string(channels) + ", " +
                std::to_string(height) + ", " + std::to_string(width) + "] must be positive");
  }
  return channels * height * width;
}

constexpr bool kHostAccessible = Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible;

// Waits for kernels that wrote a buffer MPI is about to read (a no-op on the host backends).
void fence_before_mpi() {
#if KOKKOS_VERSION >= 30600
  Kokkos::fence(TRELLIS_KERNEL_LABEL("trellis::batchnorm::sync_fence"));
#else
  Kokkos::fence();
#endif
}

}  // namespace

BatchNorm2d::BatchNorm2d(ParameterStore& store, const std::string& name, int channels, int height,
                         int width, int capacity, float momentum, float eps, const MpiComm* sync,
                         int channel_block, bool relu_after)
    : Layer(name, checked_features(name, channels, height, width), channels * height * width,
            capacity),
      store_(&store),
      channels_(channels),
      plane_(height * width),
      channel_block_(channel_block),
      relu_after_(relu_after),
      momentum_(momentum),
      eps_(eps),
      sync_(sync),
      running_("trellis::nn::" + name + ".running", 2 * static_cast<std::size_t>(channels)),
      rerun_running_("trellis::nn::" + name + ".rerun_running",
                     2 * static_cast<std::size_t>(channels)),
      sums_("trellis::nn::" + name + ".sums", 2 * static_cast<std::size_t>(channels) + 1),
      stats_("trellis::nn::" + name + ".stats", 2 * static_cast<std::size_t>(channels)) {
  if (!(momentum >= 0.0f && momentum <= 1.0f) || !(eps > 0.0f)) {
    throw Error("batchnorm \"" + name + "\": momentum must be in [0, 1] and eps positive");
  }
  layout().require_fits(channels, ("batchnorm \"" + name + "\"").c_str());
  if (sync_ != nullptr && sync_->get() == MPI_COMM_NULL) {
    throw Error("batchnorm \"" + name + "\": sync communicator is MPI_COMM_NULL");
  }
  weight_ = store.add(name + ".weight", {channels}, InitSpec::constant(1.0), false);
  bias_ = store.add(name + ".bias", {channels}, InitSpec::zeros(), false);
  kernels::fill(running_var(), 1.0f);  // running_mean starts at 0 (zero-filled View)
  if constexpr (kHostAccessible) {
    host_sums_ = HostDoubleView(sums_.data(), sums_.extent(0));
  } else {
    host_sums_ = HostDoubleView("trellis::nn::" + name + ".host_sums", sums_.extent(0));
  }
}

kernels::Vector BatchNorm2d::running_mean() const {
  return kernels::Vector(running_.data(), static_cast<std::size_t>(channels_));
}
kernels::Vector BatchNorm2d::running_var() const {
  return kernels::Vector(running_.data() + channels_, static_cast<std::size_t>(channels_));
}
kernels::Vector BatchNorm2d::running_stats() const {
  return kernels::Vector(running_.data(), running_.extent(0));
}

double BatchNorm2d::allreduce_sums(int values, double local_count) {
  if constexpr (kHostAccessible) {
    fence_before_mpi();
  } else {
    Kokkos::deep_copy(host_sums_, sums_);
  }
  const bool with_count = local_count >= 0.0;
  if (with_count) host_sums_(static_cast<std::size_t>(values)) = local_count;
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, host_sums_.data(), values + (with_count ? 1 : 0),
                            MPI_DOUBLE, MPI_SUM, sync_->get()));
  if constexpr (!kHostAccessible) Kokkos::deep_copy(sums_, host_sums_);
  return with_count ? host_sums_(static_cast<std::size_t>(values)) : 0.0;
}

void BatchNorm2d::forward(ConstMatrix input, int n, const StepContext& ctx) {
  // Parameters first: a store that is not finalized throws before the call is recorded.
  const kernels::ConstVector gamma = store_->param_vector(weight_);
  const kernels::ConstVector beta = store_->param_vector(bias_);
  const ConstMatrix x = begin_forward(input, n);
  const kernels::DoubleVector sums(sums_.data(), sums_.extent(0));
  const kernels::DoubleVector stats(stats_.data(), stats_.extent(0));
  training_ = ctx.training;
  if (training_) {
    kernels::batchnorm_sums(x, layout(), sums);
    const double local_count = static_cast<double>(n) * plane_;
    // With sync, the count rides along in the same all-reduce (element 2C).
    count_ = sync_ != nullptr ? allreduce_sums(2 * channels_, local_count) : local_count;
    // A recomputed forward moves the running statistics once more into a copy nobody reads.
    if (ctx.recomputing) Kokkos::deep_copy(rerun_running_, running_);
    kernels::batchnorm_batch_stats(
        sums, count_, eps_, momentum_, stats,
        ctx.recomputing ? kernels::Vector(rerun_running_.data(), rerun_running_.extent(0))
                        : running_stats());
  } else {
    kernels::batchnorm_running_stats(running_stats(), eps_, stats);
  }
  kernels::batchnorm_normalize(x, layout(), stats, gamma, beta, output_rows(n), relu_after_);
}

void BatchNorm2d::backward(ConstMatrix output_grad, int n) {
  // With the ReLU fused, dy is its output's gradient: the kernels mask it by the output.
  backward_masked(output_grad, relu_after_ ? output() : ConstMatrix(), n);
}

void BatchNorm2d::backward_through_relu(ConstMatrix output_grad, ConstMatrix relu_output, int n) {
  TRELLIS_REQUIRE(!relu_after_, "batchnorm \"" + name() + "\": a ReLU inside and one after it");
  if (relu_output.extent(1) != static_cast<std::size_t>(out_features()) ||
      relu_output.extent(0) < static_cast<std::size_t>(n))
    throw Error("batchnorm \"" + name() + "\": ReLU output " +
                kernels::extents_string(relu_output) + " for " + std::to_string(n) + " rows of " +
                std::to_string(out_features()) + " features");
  backward_masked(output_grad, relu_output, n);
}

void BatchNorm2d::backward_masked(ConstMatrix output_grad, ConstMatrix mask_rows, int n) {
  const ConstMatrix dy = begin_backward(output_grad, n);
  const ConstMatrix x = saved_input();
  const kernels::DoubleVector sums(sums_.data(), sums_.extent(0));
  const kernels::ConstDoubleVector stats(stats_.data(), stats_.extent(0));
  const ConstMatrix relu_output =
      mask_rows.data() != nullptr ? kernels::first_rows(mask_rows, n) : ConstMatrix();
  kernels::batchnorm_backward_sums(x, dy, layout(), stats, sums, relu_output);
  // Parameter gradients from this rank's rows (the DP all-reduce sums them over ranks).
  kernels::batchnorm_param_grads(sums, store_->grad_vector(weight_), store_->grad_vector(bias_));
  if (training_ && sync_ != nullptr) allreduce_sums(2 * channels_, -1.0);
  kernels::batchnorm_backward_input(x, dy, layout(), stats, store_->param_vector(weight_), sums,
                                    count_, training_, input_grad_rows(n), relu_output);
}

}  // namespace trellis::nn
