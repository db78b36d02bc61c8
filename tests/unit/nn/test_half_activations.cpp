// 16-bit activations between layers (nn/linear.hpp: LinearBuffers::half_output / half_input):
// a GELU Linear that keeps its output in 16 bits feeding a Linear that reads it as it is
// computes what the fp32-buffer native path computes on the same rounded values, and keeps
// no fp32 output, no fp32 pre-activation and no rounded input copy. And whole transformer
// blocks (GPT-2's, Llama's) in a block stack, whose attention keeps q, k, v and its output in
// 16 bits and whose transient fp32 buffers every block shares, follow the emulated blocks
// (fp32 buffers throughout) within bf16 rounding, with and without recomputation.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/precision.hpp"
#include "trellis/kernels/activation.hpp"
#include "trellis/kernels/gemm_half.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/autocast.hpp"
#include "trellis/nn/block_stack.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/transformer.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace trellis;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr Precision kBf16 = Precision::bf16;

std::vector<float> flat(ConstMatrix m, int rows) {
  return to_host(kernels::ConstVector(m.data(), static_cast<std::size_t>(rows) * m.extent(1)));
}
std::vector<float> widened(const kernels::GemmOperand& h, int rows) {
  std::vector<float> out(static_cast<std::size_t>(rows) * h.cols);
  Kokkos::View<const std::uint16_t*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> words(
      h.h16, out.size());
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), words);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = half_bits_to_float(h.format, host(i));
  return out;
}
// ||a - b|| / ||b||: a wrong buffer or row is off by O(1), rounding by 2^-8.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / (norm + 1e-30));
}

void make_native(nn::ParameterStore& store) {
  nn::Autocast autocast;
  autocast.mode = kBf16;
  autocast.native = true;
  store.set_autocast(autocast);
}

}  // namespace

TEST_CASE("two Linears hand each other 16-bit activations", "[autocast][half]") {
  if (!kernels::native_gemm_available(kBf16)) return;  // no native path to test here
  const int cap = 12, rows = 9, d = 40, f = 96;
  nn::ParameterStore half_store, ref_store;
  make_native(half_store);
  make_native(ref_store);
  const auto normal = nn::InitSpec::normal(0.1);
  const auto bias = std::optional<nn::InitSpec>(nn::InitSpec::normal(0.1));
  nn::LinearBuffers out16, in16;
  out16.half_output = true;
  in16.half_input = true;
  nn::Linear fc(half_store, "fc", d, f, cap, normal, bias, nn::Split::none, {}, 1, out16);
  nn::Linear proj(half_store, "proj", f, d, cap, normal, bias, nn::Split::none, {}, 1, in16);
  fc.fuse_activation(kernels::Activation::gelu);
  // The reference: fc without its activation (its output is round(x W^T + b), the 16-bit
  // pre-activation), the GELU applied here, proj on fp32 buffers holding the same values.
  nn::Linear fc_ref(ref_store, "fc", d, f, cap, normal, bias);
  nn::Linear proj_ref(ref_store, "proj", f, d, cap, normal, bias);
  half_store.finalize(11);
  ref_store.finalize(11);
  REQUIRE(fc.stores_half_output());
  REQUIRE(proj.reads_half_input());
  CHECK(fc.output().size() == 0);
  CHECK_THROWS_AS(proj.forward(fc_ref.output(), rows, {}), Error);  // takes 16-bit input only

  const FloatView x = to_device("x", random_values(cap * d, 1, -2.0f, 2.0f));
  const FloatView dy = to_device("dy", random_values(cap * d, 2));
  fc.forward(as_matrix(x, cap, d), rows, {});
  proj.forward_half(fc.output_half(), rows, {});
  fc_ref.forward(as_matrix(x, cap, d), rows, {});
  std::vector<float> s = flat(fc_ref.output(), rows), g(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) g[i] = round_to(kBf16, kernels::gelu(s[i]));
  const FloatView g_ref = to_device("g", g);
  proj_ref.forward(as_matrix(g_ref, rows, f), rows, {});
  CHECK(relative_error(widened(fc.output_half(), rows), g) < 1e-2);
  CHECK(relative_error(flat(proj.output(), rows), flat(proj_ref.output(), rows)) < 1e-2);

  half_store.zero_grads();
  ref_store.zero_grads();
  proj.backward(as_matrix(dy, cap, d), rows);
  fc.backward(proj.input_grad(), rows);
  proj_ref.backward(as_matrix(dy, cap, d), rows);
  std::vector<float> dz = flat(proj_ref.input_grad(), rows);
  for (std::size_t i = 0; i < dz.size(); ++i) dz[i] *= kernels::gelu_grad(s[i]);
  const FloatView dz_ref = to_device("dz", dz);
  fc_ref.backward(as_matrix(dz_ref, rows, f), rows);
  CHECK(relative_error(flat(fc.input_grad(), rows), flat(fc_ref.input_grad(), rows)) < 2e-2);
  for (const char* p : {"fc.weight", "fc.bias", "proj.weight", "proj.bias"}) {
    INFO(p);
    CHECK(relative_error(to_host(half_store.grad(half_store.index(p))),
                         to_host(ref_store.grad(ref_store.index(p)))) < 2e-2);
  }
}

TEST_CASE("16-bit activation buffers are native-only", "[autocast][half]") {
  // Emulated kernels and fp32 keep fp32 buffers whatever LinearBuffers asks.
  for (bool autocast_on : {false, true}) {
    nn::ParameterStore store;
    if (autocast_on) {
      nn::Autocast emulated;
      emulated.mode = kBf16;
      store.set_autocast(emulated);
    }
    nn::LinearBuffers both;
    both.half_output = both.half_input = true;
    nn::Linear fc(store, "fc", 8, 16, 4, nn::InitSpec::normal(0.1), std::nullopt, nn::Split::none,
                  {}, 1, both);
    CHECK_FALSE(fc.stores_half_output());
    CHECK_FALSE(fc.reads_half_input());
    CHECK(fc.output().size() == 16 * 4);
    CHECK_THROWS_AS(fc.output_half(), Error);
  }
}

namespace {

// Two blocks in a stack under `autocast`; returns the output, the input gradient and every
// parameter gradient, flattened in that order.
std::vector<std::vector<float>> run_two_blocks(bool native, const nn::BlockSpec& spec,
                                               nn::Recompute recompute, int n) {
  nn::ParameterStore store;
  nn::Autocast autocast;
  autocast.mode = kBf16;
  autocast.native = native;
  store.set_autocast(autocast);
  nn::RecomputeSpec how;
  how.mode = recompute;
  nn::BlockSpec block_spec = spec;
  block_spec.recompute_cheap = recompute == nn::Recompute::selective;
  nn::BlockStack stack("h", how, n);
  std::vector<std::unique_ptr<nn::Block>> blocks;
  for (std::size_t i = 0; i < 2; ++i) {
    const nn::SharedBufferScope scope = stack.building(i);
    blocks.push_back(std::make_unique<nn::Block>(store, "h." + std::to_string(i), block_spec, n));
    stack.add(*blocks.back());
  }
  stack.finish();
  store.finalize(5);
  for (std::size_t i = 0; i < store.size(); ++i)  // gains near 1, the rest small
    kernels::fill_uniform(store.param_vector(i), store.info(i).shape.size() == 1 ? 0.5f : -0.3f,
                          store.info(i).shape.size() == 1 ? 1.5f : 0.3f, 99, i);
  store.refresh_compute_copy(0);
  const int d = spec.d_model;
  const FloatView x = to_device("x", random_values(static_cast<std::size_t>(n) * d, 3, -2, 2));
  const FloatView dy = to_device("dy", random_values(static_cast<std::size_t>(n) * d, 4));
  nn::StepContext ctx;
  const std::vector<float> y = flat(stack.forward(as_matrix(x, n, d), n, ctx), n);
  store.zero_grads();
  const std::vector<float> dx = flat(stack.backward(as_matrix(dy, n, d), n, [](std::size_t) {}), n);
  std::vector<std::vector<float>> out{y, dx};
  for (std::size_t i = 0; i < store.size(); ++i) out.push_back(to_host(store.grad(i)));
  return out;
}

}  // namespace

TEST_CASE("transformer blocks with 16-bit activations follow the emulated ones",
          "[autocast][half][gpt]") {
  if (!kernels::native_gemm_available(kBf16)) return;
  const int T = 8, n = 2 * T;
  nn::BlockSpec gpt = nn::BlockSpec::gpt2(32, 4, T, 0.0f);
  const nn::RotaryTables rope(kernels::RopeSpec{}, 8, T);
  nn::BlockSpec llama = nn::BlockSpec::gpt2(32, 4, T, 0.0f);
  llama.n_kv_head = 2;
  llama.d_ff = 48;
  llama.mlp = nn::MlpKind::swiglu;
  llama.norm = nn::NormKind::rmsnorm;
  llama.bias = false;
  llama.rope = &rope;
  for (const auto& [label, spec] : {std::pair<const char*, nn::BlockSpec>{"gpt", gpt},
                                    std::pair<const char*, nn::BlockSpec>{"llama", llama}}) {
    for (nn::Recompute r : {nn::Recompute::none, nn::Recompute::selective, nn::Recompute::full}) {
      INFO(label << " recompute " << nn::recompute_name(r));
      const auto native = run_two_blocks(true, spec, r, n);
      const auto emulated = run_two_blocks(false, spec, r, n);
      REQUIRE(native.size() == emulated.size());
      for (std::size_t i = 0; i < native.size(); ++i) {
        INFO("tensor " << i << " (0: output, 1: input gradient, then the parameters')");
        CHECK(relative_error(native[i], emulated[i]) < 3e-2);
      }
      // Recomputation reruns the same kernels: bit for bit the run without it.
      if (r != nn::Recompute::none)
        CHECK(native == run_two_blocks(true, spec, nn::Recompute::none, n));
    }
  }
}
