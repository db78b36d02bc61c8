// GPT-2 / nanoGPT initialisation of a transformer's Linear weights: normal(0, std), with the
// residual projections (c_proj) scaled down to std / sqrt(2 * n_layer) so that the residual
// stream's variance does not grow with depth. Biases are zero.
#pragma once

#include <cmath>

namespace trellis::nn {

struct TransformerInit {
  double std = 0.02;
  double proj_std = 0.02;  // nanoGPT: 0.02 / sqrt(2 * n_layer)

  static TransformerInit gpt2(int n_layer) {
    return TransformerInit{0.02, 0.02 / std::sqrt(2.0 * n_layer)};
  }
};

}  // namespace trellis::nn
