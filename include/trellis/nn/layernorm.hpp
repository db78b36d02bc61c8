// Normalisation over the features of each row (token): PyTorch's nn.LayerNorm(d, eps), or
// RMSNorm (Llama's, Hugging Face's LlamaRMSNorm), chosen by NormKind.
//
//   x [n, d]   gamma "<name>.weight" [d] = 1, beta "<name>.bias" [d] = 0 (layernorm only;
//              neither decays)
//   y [n, d]
// layernorm: y = (x - mean_r) * rstd_r * gamma + beta,  rstd_r = 1 / sqrt(var_r + eps), var
//            biased; mean_r and rstd_r are kept per row for backward
//            dx = rstd_r (g - mean(g) - xhat mean(g xhat)),  g = dy gamma      (=)
//            dgamma += sum_r dy xhat,  dbeta += sum_r dy                       (+=)
// rmsnorm:   y = x * rstd_r * gamma,  rstd_r = 1 / sqrt(mean_j x_rj^2 + eps), no bias
//            dx = rstd_r (g - xhat mean(g xhat)),  dgamma += sum_r dy xhat
// See kernels/layernorm.hpp and kernels/rmsnorm.hpp for the kernels (deterministic column sums).
#pragma once

#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/int8.hpp"
#include "trellis/nn/layer.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace trellis::nn {

enum class NormKind { layernorm, rmsnorm };

// "layernorm" | "rmsnorm" (ConfigError naming model.norm otherwise), and back.
NormKind parse_norm_kind(const std::string& name);
const char* norm_kind_name(NormKind kind);

class LayerNorm : public Layer {
 public:
  // output_role (nn/buffer_pool.hpp): cheap by default, as the output is recomputable from the
  // kept input and statistics; transient where only the next layer's forward reads it (a Linear
  // under autocast keeps its own rounded copy).
  LayerNorm(ParameterStore& store, const std::string& name, int d, int capacity_rows,
            float eps = 1e-5f, NormKind kind = NormKind::layernorm,
            BufferRole output_role = BufferRole::cheap);

  void forward(ConstMatrix input, int n, const StepContext& ctx) override;
  void backward(ConstMatrix output_grad, int n) override;
  // Int8 inference: the forward's y for rows [0, rows) of x quantized with q into out (the next
  // int8 Linear's input), y itself not written.
  void forward_quantized(ConstMatrix x, int rows, const kernels::ActivationQuant& q,
                         kernels::ByteView out) const;

  NormKind kind() const { return kind_; }
  float eps() const { return eps_; }
  std::size_t weight_index() const { return weight_; }
  std::optional<std::size_t> bias_index() const { return bias_; }  // rmsnorm: none

 private:
  ParameterStore* store_;
  NormKind kind_;
  float eps_;
  std::size_t weight_;
  std::optional<std::size_t> bias_;
  FloatView mean_, rstd_;  // [capacity]: the last forward's row statistics (mean: layernorm)
};

}  // namespace trellis::nn
