#include "trellis/nn/decoder_spec.hpp"

#include "trellis/nn/buffer_pool.hpp"

#include "trellis/core/error.hpp"

#include <string>

namespace trellis::nn {

MlpKind parse_mlp_kind(const std::string& name) {
  if (name == "gelu") return MlpKind::gelu;
  if (name == "gelu_tanh") return MlpKind::gelu_tanh;
  if (name == "swiglu") return MlpKind::swiglu;
  throw ConfigError("config key model.mlp = \"" + name + "\": expected gelu, gelu_tanh or swiglu");
}

const char* mlp_kind_name(MlpKind kind) {
  switch (kind) {
    case MlpKind::gelu_tanh:
      return "gelu_tanh";
    case MlpKind::swiglu:
      return "swiglu";
    case MlpKind::gelu:
      break;
  }
  return "gelu";
}

RotaryTables::RotaryTables(const kernels::RopeSpec& spec, int head_dim_, int positions_)
    : head_dim(head_dim_), positions(positions_) {
  const auto size = static_cast<std::size_t>(positions_) * static_cast<std::size_t>(head_dim_ / 2);
  // A model built only to be counted (memory plans: buffer_pool.hpp's BufferCensus) never
  // runs: its tables are allocated (the plan counts them) but neither zeroed nor filled. The
  // planner builds thousands of such models, and the sines and first touches were most of it.
  if (BufferCensus::active() != nullptr) {
    cos = FloatView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "trellis::nn::rope.cos"), size);
    sin = FloatView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "trellis::nn::rope.sin"), size);
    return;
  }
  cos = FloatView("trellis::nn::rope.cos", size);
  sin = FloatView("trellis::nn::rope.sin", size);
  kernels::rope_tables(spec, head_dim_, positions_, cos, sin);
}

}  // namespace trellis::nn
