// The training step allocates nothing once warmed up (DESIGN.md, performance habits): every
// buffer and workspace is sized when the model is built. This counts C++ heap allocations
// (operator new, which std::string, std::vector and Kokkos View construction all go through)
// during steady-state steps of the MLP, loss, sampler, clipping and optimizer.
#include "catch.hpp"

#include "trellis/data/augment.hpp"
#include "trellis/data/sampler.hpp"
#include "trellis/kernels/bias_activation_half.hpp"
#include "trellis/kernels/precision_cast.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/swiglu.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/nn/softmax_xent.hpp"
#include "trellis/optim/clip.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/train/input/prefetch_source.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
std::atomic<std::size_t> largest_allocation{0};  // bytes, while counting
}  // namespace

// Host code only: nvcc (CUDA builds compile this file as CUDA) would otherwise also compile the
// replacement for the device, where the CUDA headers declare their own operator new and
// exceptions are not supported. __CUDA_ARCH__ is defined only in nvcc's device pass.
#if !defined(__CUDA_ARCH__)
void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    std::size_t seen = largest_allocation.load(std::memory_order_relaxed);
    while (size > seen && !largest_allocation.compare_exchange_weak(seen, size)) {
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The replacement new above allocates with malloc, so free is the matching call; GCC 12 cannot
// see that through an inlined delete-expression and warns (-Wmismatched-new-delete).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
#endif

TEST_CASE("a warmed-up training step makes no heap allocation", "[perf][alloc]") {
  using namespace trellis;
  const int batch = 32, micro = 16, input = 20, classes = 5;
  nn::ParameterStore store;
  nn::MlpSpec spec;
  spec.input_dim = input;
  spec.hidden = {24, 16};
  spec.classes = classes;
  spec.activation = "gelu";
  spec.dropout = 0.1f;
  spec.capacity = micro;
  nn::Mlp model(spec, store);
  store.finalize(7);
  nn::SoftmaxCrossEntropy loss(classes, micro);
  OptimizerSpec ospec;
  ospec.type = trellis::OptimizerType::adamw;
  ospec.weight_decay = 0.01f;
  ospec.beta1 = 0.9f;
  ospec.beta2 = 0.999f;
  ospec.eps = 1e-8f;
  auto optimizer = make_optimizer(ospec, store.buffer_size(), store.decay_mask());
  DistributedSampler sampler(1000, batch, 3, true);
  LocalBatch local;

  FloatView inputs("inputs", static_cast<std::size_t>(batch * input));
  kernels::fill_uniform(inputs, -1.0f, 1.0f, 1, 2);
  IntView labels("labels", static_cast<std::size_t>(batch));
  Kokkos::deep_copy(labels, 3);

  auto step = [&](std::int64_t s) {
    sampler.local_indices(0, s, 0, 1, local);
    store.zero_grads();
    for (int first = 0; first < batch; first += micro) {
      nn::StepContext ctx{7, s, first, true};
      ConstMatrix x(inputs.data() + first * input, micro, input);
      kernels::ConstLabels y(labels.data() + first, micro);
      ConstMatrix logits = model.forward(x, micro, ctx);
      loss.forward(logits, y, micro);
      loss.backward(1.0f / batch);
      model.backward(loss.input_grad(), micro);
    }
    clip_grad_norm(store.grads(), 1.0);
    optimizer->step(store.params(), store.grads(), 1e-3f);
  };
  step(0);
  step(1);
  allocations = 0;
  counting = true;
  for (std::int64_t s = 2; s < 6; ++s) step(s);
  counting = false;
  CHECK(allocations.load() == 0);
}

namespace {

// Two warm-up steps, then counts allocations over four training steps and one eval forward.
long allocations_in_steady_state(trellis::nn::Model& model, trellis::nn::ParameterStore& store,
                                 const trellis::nn::ModelInput& input,
                                 trellis::kernels::ConstLabels targets, int n) {
  using namespace trellis;
  nn::SoftmaxCrossEntropy loss(model.classes(), n * model.rows_per_sample());
  OptimizerSpec ospec;
  ospec.type = trellis::OptimizerType::adamw;
  ospec.beta1 = 0.9f;
  ospec.beta2 = 0.999f;
  ospec.eps = 1e-8f;
  auto optimizer = make_optimizer(ospec, store.buffer_size(), store.decay_mask());
  auto step = [&](std::int64_t s, bool training) {
    store.zero_grads();
    nn::StepContext ctx{7, s, 0, training};
    ConstMatrix logits = model.forward(input, n, ctx);
    loss.forward(logits, targets, n * model.rows_per_sample());
    if (!training) return;
    loss.backward(1.0f / n);
    model.backward(loss.input_grad(), n);
    optimizer->step(store.params(), store.grads(), 1e-3f);
  };
  step(0, true);
  step(1, true);
  step(2, false);
  allocations = 0;
  largest_allocation = 0;
  counting = true;
  for (std::int64_t s = 3; s < 7; ++s) step(s, true);
  step(7, false);
  counting = false;
  return allocations.load();
}

}  // namespace

namespace {

long cnn_steady_state_allocations(trellis::nn::ConvImpl impl) {
  using namespace trellis;
  const int n = 8;
  nn::ParameterStore store;
  nn::CnnSpec spec;
  spec.channels = 1;
  spec.height = spec.width = 12;
  spec.classes = 5;
  spec.widths = {8, 16};
  spec.capacity = n;
  spec.conv_impl = impl;
  nn::Cnn model(spec, store);
  store.finalize(3);
  FloatView images("images", static_cast<std::size_t>(n * 144));
  kernels::fill_uniform(images, -1.0f, 1.0f, 1, 2);
  IntView labels("labels", static_cast<std::size_t>(n));
  Kokkos::deep_copy(labels, 2);
  nn::ModelInput input;
  input.features = ConstMatrix(images.data(), n, 144);
  return allocations_in_steady_state(model, store, input, labels, n);
}

}  // namespace

TEST_CASE("a warmed-up CNN step makes no heap allocation", "[perf][alloc]") {
  CHECK(cnn_steady_state_allocations(trellis::nn::ConvImpl::im2col) == 0);
}

// oneDNN's executor turns every call's argument array into a small map of its own
// (dnnl_primitive_execute), which Trellis cannot avoid; what must not happen is a buffer: no
// allocation in the step may be larger than that bookkeeping.
TEST_CASE("a warmed-up CNN step on the vendor convolution allocates no buffers",
          "[perf][alloc][vendor]") {
  if (*trellis::nn::vendor_conv_name() == '\0') {
    WARN("this build has no vendor convolution");
    return;
  }
  const long count = cnn_steady_state_allocations(trellis::nn::ConvImpl::vendor);
  INFO(count << " allocations, the largest " << largest_allocation.load() << " bytes");
  CHECK(largest_allocation.load() <= 1024);
}

TEST_CASE("a warmed-up GPT step makes no heap allocation", "[perf][alloc]") {
  using namespace trellis;
  const int n = 4, seq_len = 8;
  nn::ParameterStore store;
  nn::GptSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.d_model = 16;
  spec.seq_len = seq_len;
  spec.vocab = 11;
  spec.dropout = 0.1f;
  spec.capacity = n;
  nn::Gpt model(spec, store);
  store.finalize(3);
  IntView tokens("tokens", static_cast<std::size_t>(n * seq_len));
  Kokkos::deep_copy(tokens, 5);
  nn::ModelInput input;
  input.tokens = tokens;
  CHECK(allocations_in_steady_state(model, store, input, tokens, n) == 0);
}

// The native 16-bit path's own kernels (a whole native step also counts oneDNN's: its
// dnnl_primitive_execute allocates inside on every call, measured 621 allocations per
// warmed-up 2-layer Llama step against 0 with emulated kernels).
TEST_CASE("the 16-bit activation kernels make no heap allocation", "[perf][alloc]") {
  using namespace trellis;
  const int rows = 6, cols = 300;  // more than one column tile
  const auto size = static_cast<std::size_t>(rows * cols);
  FloatView z("z", size), bias("bias", cols), grad("grad", cols), gu("gu", 2 * size);
  kernels::HalfView z16("z16", size), y16("y16", size), dz16("dz16", size), gu16("gu16", 2 * size);
  const Precision p = Precision::bf16;
  allocations = 0;
  counting = true;
  for (kernels::Activation f : {kernels::Activation::none, kernels::Activation::gelu}) {
    kernels::bias_activation_forward_half(p, as_matrix(z, rows, cols), bias, f, z16, y16);
    kernels::bias_activation_backward_half(p, z16, as_matrix(z, rows, cols), f, dz16, grad);
  }
  kernels::activation_forward_half(p, z16, kernels::Activation::gelu, y16);
  kernels::swiglu_forward_half(p, gu16, rows, y16);
  kernels::swiglu_backward_half(p, gu16, as_matrix(z, rows, cols), as_matrix(gu, rows, 2 * cols));
  kernels::from_half(p, z16, z);
  counting = false;
  CHECK(allocations.load() == 0);
}

namespace {

// Augmented [1, 8, 8] images on the loader thread, like SampleTrainSource without the file.
class AugmentedFakeSource : public trellis::TrainSource {
 public:
  AugmentedFakeSource()
      : augmenter_(trellis::parse_augment("crop,flip", 2), 5, trellis::Shape{1, 8, 8}, {0.0f}),
        indices_{3, 1, 4, 1, 5, 9} {}
  trellis::DataShape shape() const override {
    trellis::DataShape s;
    s.sample_shape = {1, 8, 8};
    s.feature_numel = 64;
    s.classes = 10;
    return s;
  }
  std::int64_t steps_per_epoch() const override { return 4; }
  trellis::LocalPart load(std::int64_t epoch, std::int64_t, std::int64_t global,
                          trellis::BatchBuffers& buffers) override {
    for (std::int64_t i = 0; i < 6 * 64; ++i)
      buffers.host_features(i) = static_cast<float>(i + global);
    for (std::int64_t i = 0; i < 6; ++i) buffers.host_targets(i) = 1;
    augmenter_.apply(epoch, indices_.data(), 6, buffers.host_features.data());
    trellis::LocalPart part;
    part.samples = part.global_samples = 6;
    return part;
  }
  std::string describe() const override { return "fake"; }

 private:
  trellis::ImageAugmenter augmenter_;
  std::vector<std::int64_t> indices_;
};

}  // namespace

TEST_CASE("warmed-up prefetched, augmented batch loads make no heap allocation", "[perf][alloc]") {
  using namespace trellis;
  PrefetchingTrainSource source(std::make_unique<AugmentedFakeSource>(), 2, 6, 100);
  BatchBuffers buffers(6, 64, 0);
  auto load = [&](std::int64_t g) { source.load(g / 4, g % 4, g, buffers); };
  load(0);
  load(1);
  allocations = 0;
  counting = true;  // counts the loader thread's allocations too
  for (std::int64_t g = 2; g < 12; ++g) load(g);
  counting = false;
  CHECK(allocations.load() == 0);
}
