// Throughput of one GPT training step's forward + loss + backward, without dropout and with
// dropout 0.1: OPENBLAS_NUM_THREADS=1 build/trellis_gpt_step_bench
// Config: n_layer 4, n_head 4, d_model 128, seq_len 128, vocab 256, 16 sequences per call.
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/nn/gpt.hpp"

#include <Kokkos_Core.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

using namespace trellis;

namespace {

void bench(float dropout) {
  nn::GptSpec spec;
  spec.n_layer = 4;
  spec.n_head = 4;
  spec.d_model = 128;
  spec.seq_len = 128;
  spec.vocab = 256;
  spec.dropout = dropout;
  spec.capacity = 16;
  const int n = spec.capacity, rows = n * spec.seq_len;
  nn::ParameterStore store;
  nn::Gpt gpt(spec, store);
  store.finalize(1);

  std::vector<std::int32_t> host(static_cast<std::size_t>(rows) + 1);
  for (std::size_t i = 0; i < host.size(); ++i)
    host[i] = static_cast<std::int32_t>((i * 7919 + i / 3) % 256);
  IntView tokens("tokens", host.size());
  Kokkos::deep_copy(tokens,
                    Kokkos::View<std::int32_t*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        host.data(), host.size()));
  const kernels::ConstLabels input(tokens.data(), static_cast<std::size_t>(rows));
  const kernels::ConstLabels targets(tokens.data() + 1, static_cast<std::size_t>(rows));
  FloatView dlogits("dlogits",
                    static_cast<std::size_t>(rows) * static_cast<std::size_t>(spec.vocab));
  const Matrix dl = as_matrix(dlogits, rows, spec.vocab);

  double loss = 0.0;
  auto step = [&](std::int64_t s) {
    store.zero_grads();
    const nn::StepContext ctx{1, s, 0, true};
    const ConstMatrix logits = gpt.forward(input, n, ctx);
    loss = kernels::softmax_xent_forward(logits, targets).loss_sum / rows;
    kernels::softmax_xent_backward(logits, targets, 1.0f / static_cast<float>(rows), dl);
    gpt.backward(dl, n);
    Kokkos::fence();
  };
  step(0);
  const int steps = 5;
  const auto start = std::chrono::steady_clock::now();
  for (int s = 1; s <= steps; ++s) step(s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens_per_s = static_cast<double>(steps) * rows / seconds;
  const double gflops = static_cast<double>(gpt.flops_per_sample()) * n * steps / seconds * 1e-9;
  std::printf(
      "%s, dropout %.1f, %d sequences: %.1f ms/step, %.0f tokens/s, %.1f GFLOP/s (model FLOPs), "
      "%lld parameters, loss %.4f\n",
      gpt.describe().c_str(), static_cast<double>(dropout), n, 1e3 * seconds / steps, tokens_per_s,
      gflops, static_cast<long long>(store.num_elements()), loss);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  bench(0.0f);
  bench(0.1f);
  return 0;
}
