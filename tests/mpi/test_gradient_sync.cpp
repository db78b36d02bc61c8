// GradientSync: bucketed data-parallel gradient reduction overlapped with backward, and ZeRO-1,
// on a small Mlp whose ranks each see different data, at whatever world size the test runs
// (dp = the world). References are computed independently: a second copy of the model without
// the sync, reduced with a plain MPI_Allreduce.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"

#include "unit/test_nn_util.hpp"

#include "trellis/comm/node_shared_window.hpp"
#include "trellis/comm/process_grid.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/mlp.hpp"
#include "trellis/optim/clip.hpp"
#include "trellis/optim/optimizer.hpp"
#include "trellis/parallel/gradient_sync.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

using namespace trellis;
using trellis::test::to_host;

namespace {

constexpr int kInputs = 20;
constexpr int kClasses = 5;
constexpr int kRows = 8;  // rows per micro-batch (the model's capacity)
constexpr int kMicroBatches = 2;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

nn::MlpSpec mlp_spec() {
  nn::MlpSpec spec;
  spec.input_dim = kInputs;
  spec.hidden = {33, 17};
  spec.classes = kClasses;
  spec.capacity = kRows;
  spec.dropout = 0.0f;
  return spec;
}

// dlogits = 0.1 logits - 0.05 class: depends on the parameters, so optimizer steps matter.
void fixed_dlogits(ConstMatrix logits, Matrix dlogits) {
  const int cols = static_cast<int>(logits.extent(1));
  Kokkos::parallel_for(
      "test::dlogits", Kokkos::RangePolicy<ExecSpace>(0, static_cast<int>(logits.size())),
      KOKKOS_LAMBDA(int e) {
        const int i = e / cols, j = e % cols;
        dlogits(i, j) = 0.1f * logits(i, j) - 0.05f * static_cast<float>(j);
      });
}

// A model in a store padded for the dp size, with its input and dlogits buffers.
struct Net {
  nn::ParameterStore store;
  std::unique_ptr<nn::Mlp> mlp;
  FloatView input{"test::input", std::size_t{kRows} * kInputs};
  FloatView dlogits{"test::dlogits", std::size_t{kRows} * kClasses};
  bool simulate_progress = false;  // report grads_final_from here (the model does not)

  explicit Net(int dp_size, bool finalize = true) {
    mlp = std::make_unique<nn::Mlp>(mlp_spec(), store);
    store.pad_to_multiple(GradientSync::padding_multiple(dp_size));
    if (finalize) store.finalize(2024);
  }

  // Forward + backward of micro-batch k of `step` on this rank's own data.
  void micro_batch(int step, int k) {
    const auto stream = static_cast<std::uint64_t>(1000 * world_rank() + 10 * step + k);
    kernels::fill_uniform(input, -1.0f, 1.0f, 99, stream);
    nn::StepContext ctx;
    ctx.step = step;
    ConstMatrix logits = mlp->forward(as_matrix(input, kRows, kInputs), kRows, ctx);
    Matrix dl = as_matrix(dlogits, kRows, kClasses);
    fixed_dlogits(logits, dl);
    mlp->backward(dl, kRows);
    if (simulate_progress) {
      // What a model's backward reports: parameters in reverse registration order.
      for (std::size_t i = store.size(); i-- > 0;) store.grads_final_from(store.info(i).offset);
    }
  }
};

// Whether Mlp::backward itself reports its progress through store.grads_final_from().
bool model_reports_progress() {
  struct Counter : nn::GradReadyListener {
    int calls = 0;
    void grads_final_from(std::size_t) override { ++calls; }
  } counter;
  Net net(1);
  net.store.set_grad_listener(&counter);
  net.micro_batch(0, 0);
  net.store.set_grad_listener(nullptr);
  return counter.calls > 0;
}

// One step's gradients: zero, kMicroBatches micro-batches (the last one armed unless
// arm_last is false), finish_reduction().
void reduce_step(Net& net, GradientSync& sync, int step, bool arm_last = true) {
  net.store.zero_grads();
  for (int k = 0; k < kMicroBatches; ++k) {
    sync.begin_backward(arm_last && k == kMicroBatches - 1);
    net.micro_batch(step, k);
  }
  sync.finish_reduction();
}

// The local gradients of `step` (no sync) summed over the world with a plain MPI_Allreduce.
std::vector<float> reference_grads(int dp_size, int step, int micro_batches = kMicroBatches) {
  Net ref(dp_size);
  ref.store.zero_grads();
  for (int k = 0; k < micro_batches; ++k) ref.micro_batch(step, k);
  std::vector<float> grads = to_host(ref.store.grads());
  MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(grads.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  return grads;
}

// max |a - b| / max |b| (sums in another order differ in the last bits); 1 for a size mismatch.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1.0;
  double scale = 0.0, worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return scale > 0.0 ? worst / scale : worst;
}

// This rank's shard elements of a full-buffer host vector, as GradientSync lays them out.
std::vector<float> shard_of(const GradientSync& sync, const std::vector<float>& full) {
  return to_host(sync.gather_shard(test::to_device("full", full)));
}

}  // namespace

TEST_CASE("GradientSync sums gradients over dp, overlapped with backward", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const bool model_reports = model_reports_progress();
  if (!model_reports) WARN("Mlp::backward does not call grads_final_from: the test reports it");
  const std::vector<float> expected = reference_grads(dp.size(), 0);

  // Bucket sizes: the smallest possible (one padding multiple each), a few hundred bytes
  // (not a multiple: rounded down), and one bucket for everything.
  for (std::size_t bucket_bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{25} << 20}) {
    for (bool zero1 : {false, true}) {
      INFO("bucket_bytes " << bucket_bytes << ", zero1 " << zero1);
      std::vector<float> per_overlap[2];
      for (bool overlap : {false, true}) {
        INFO("overlap " << overlap);
        Net net(dp.size());
        net.simulate_progress = !model_reports;
        GradientSyncOptions options;
        options.bucket_bytes = bucket_bytes;
        options.overlap = overlap;
        options.zero1 = zero1;
        GradientSync sync(dp, net.store, options);
        const std::size_t multiple = GradientSync::padding_multiple(dp.size());
        const std::size_t max_bucket =
            std::max(multiple, bucket_bytes / sizeof(float) / multiple * multiple);
        CHECK(sync.bucket_count() == (net.store.buffer_size() + max_bucket - 1) / max_bucket);
        CHECK(sync.sharded() == zero1);
        CHECK(sync.update_size() ==
              (zero1 ? net.store.buffer_size() / static_cast<std::size_t>(dp.size())
                     : net.store.buffer_size()));

        reduce_step(net, sync, 0);
        // (a) buckets launched from backward: all of them, since the first layer reports too.
        CHECK(sync.buckets_started_early() == (overlap ? sync.bucket_count() : 0));
        // (b) the sum over dp of every rank's local gradients.
        const std::vector<float> got = to_host(sync.update_grads());
        CHECK(relative_error(got, zero1 ? shard_of(sync, expected) : expected) <= 1e-6);
        per_overlap[overlap] = got;

        // (c) an unarmed step starts nothing from backward and still reduces correctly.
        reduce_step(net, sync, 0, false);
        CHECK(sync.buckets_started_early() == 0);
        CHECK(to_host(sync.update_grads()) == got);
      }
      // (e) overlap changes when buckets start, never what they compute.
      CHECK(per_overlap[0] == per_overlap[1]);
    }
  }
}

TEST_CASE("GradientSync leaves non-last micro-batches alone", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const bool model_reports = model_reports_progress();
  // Local gradients after the first micro-batch only (no reduction).
  Net ref(dp.size());
  ref.micro_batch(0, 0);
  const std::vector<float> local_first = to_host(ref.store.grads());

  for (bool zero1 : {false, true}) {
    INFO("zero1 " << zero1);
    Net net(dp.size());
    net.simulate_progress = !model_reports;
    GradientSyncOptions options;
    options.bucket_bytes = 64;
    options.zero1 = zero1;
    GradientSync sync(dp, net.store, options);
    net.store.zero_grads();
    sync.begin_backward(false);
    net.micro_batch(0, 0);
    // Nothing started: the local gradients are untouched, and arming the next micro-batch
    // finds no request in flight (it throws if any is).
    CHECK(to_host(net.store.grads()) == local_first);
    CHECK_NOTHROW(sync.begin_backward(true));
    net.micro_batch(0, 1);
    // Armed: buckets are in flight now, and a new micro-batch must not begin.
    CHECK_THROWS_AS(sync.begin_backward(false), Error);
    sync.finish_reduction();
    CHECK(sync.buckets_started_early() == sync.bucket_count());
    const std::vector<float> expected = reference_grads(dp.size(), 0);
    CHECK(relative_error(to_host(sync.update_grads()),
                         zero1 ? shard_of(sync, expected) : expected) <= 1e-6);
  }
}

TEST_CASE("ZeRO-1 steps match unsharded steps and shrink the optimizer state", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  const bool model_reports = model_reports_progress();

  OptimizerSpec spec;
  spec.type = "adamw";
  spec.weight_decay = 0.1f;
  spec.beta1 = 0.9f;
  spec.beta2 = 0.999f;
  spec.eps = 1e-8f;
  const float lr = 1e-2f;
  const double max_norm = 0.5;  // small enough to clip some steps: the global norm matters

  std::vector<float> params[2];
  for (bool zero1 : {false, true}) {
    INFO("zero1 " << zero1);
    Net net(dp.size());
    net.simulate_progress = !model_reports;
    GradientSyncOptions options;
    options.bucket_bytes = 512;
    options.zero1 = zero1;
    GradientSync sync(dp, net.store, options);
    if (zero1) {
      CHECK(sync.update_size() * static_cast<std::size_t>(dp.size()) == net.store.buffer_size());
    }
    ConstFloatView mask = sync.gather_shard(net.store.decay_mask());
    auto optimizer = make_optimizer(spec, sync.update_size(), mask);
    CHECK(optimizer->numel() == sync.update_size());
    for (int step = 0; step < 3; ++step) {
      reduce_step(net, sync, step);
      double sum_sq = grad_sum_of_squares(sync.update_grads());
      if (sync.sharded()) {
        MPI_Allreduce(MPI_IN_PLACE, &sum_sq, 1, MPI_DOUBLE, MPI_SUM, grid.dp().get());
      }
      clip_to_norm(sync.update_grads(), std::sqrt(sum_sq), max_norm);
      optimizer->step(sync.update_params(), sync.update_grads(), lr);
      sync.finish_update();
    }
    params[zero1] = to_host(net.store.params());
    // Every rank holds the same whole parameters.
    std::vector<float> lo = params[zero1], hi = params[zero1];
    MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_FLOAT, MPI_MIN,
                  MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(hi.size()), MPI_FLOAT, MPI_MAX,
                  MPI_COMM_WORLD);
    CHECK(lo == hi);
    // The master shard is what the gathered parameters hold.
    if (zero1) {
      CHECK(to_host(sync.update_params()) == shard_of(sync, params[zero1]));
    }
  }
  CHECK(relative_error(params[1], params[0]) <= 1e-6);
  // The parameters moved (the steps did something).
  Net initial(dp.size());
  CHECK(relative_error(to_host(initial.store.params()), params[0]) > 1e-3);
}

TEST_CASE("GradientSync restores its master shard and rejects unpadded stores", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  CHECK(GradientSync::padding_multiple(dp.size()) ==
        static_cast<std::size_t>(dp.size()) * nn::ParameterStore::kAlignment);

  {
    // One kAlignment block: a whole multiple for dp = 1 only.
    nn::ParameterStore one_block;
    one_block.add("w", {static_cast<std::int64_t>(nn::ParameterStore::kAlignment)},
                  nn::InitSpec::constant(1.0), false);
    one_block.finalize(1);
    if (dp.size() > 1) {
      CHECK_THROWS_AS(GradientSync(dp, one_block, {}), Error);
    } else {
      CHECK_NOTHROW(GradientSync(dp, one_block, {}));
    }
    Net unfinalized(dp.size(), false);
    CHECK_THROWS_AS(GradientSync(dp, unfinalized.store, {}), Error);
  }

  Net net(dp.size());
  GradientSyncOptions options;
  options.bucket_bytes = 256;
  options.zero1 = true;
  {
    GradientSync sync(dp, net.store, options);
    // Restore: new parameters written into the store reach the master shard.
    std::vector<float> restored(net.store.buffer_size());
    for (std::size_t i = 0; i < restored.size(); ++i) restored[i] = static_cast<float>(i % 97);
    Kokkos::deep_copy(net.store.params(), test::to_device("restored", restored));
    sync.load_shard_from_params();
    CHECK(to_host(sync.update_params()) == shard_of(sync, restored));
    // An update of nothing gathers the same parameters back.
    sync.finish_update();
    CHECK(to_host(net.store.params()) == restored);
  }
  // The destructor detached the listener: reports go nowhere and nothing breaks.
  CHECK_NOTHROW(net.store.grads_final_from(0));
}

TEST_CASE("GradientSync through node shared memory matches the communicator", "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  if (!kHostMemory) return;  // device buffers never live in a shared window
  const bool model_reports = model_reports_progress();
  // ctest starts every rank on this machine.
  REQUIRE(NodeSharedWindow::on_one_node(grid.dp()));
  const std::vector<float> expected = reference_grads(dp.size(), 0);

  OptimizerSpec spec;
  spec.type = "sgd";
  spec.momentum = 0.9f;
  spec.weight_decay = 0.01f;
  for (std::size_t bucket_bytes : {std::size_t{1}, std::size_t{1000}, std::size_t{25} << 20}) {
    for (bool zero1 : {false, true}) {
      INFO("bucket_bytes " << bucket_bytes << ", zero1 " << zero1);
      std::vector<float> params[2], first_grads[2];
      for (bool shared : {false, true}) {
        INFO("shared " << shared);
        Net net(dp.size(), false);
        net.simulate_progress = !model_reports;
        const std::size_t floats =
            GradientSync::shared_floats(net.store.buffer_size(), dp.size(), zero1);
        NodeSharedWindow window(grid.dp(), floats);
        CHECK(window.size() == dp.size());
        float* part = window.part(dp.rank());
        net.store.finalize(2024, shared ? part : nullptr,
                           shared && zero1 ? part + net.store.buffer_size() : nullptr);
        CHECK((net.store.grads().data() == window.part(dp.rank())) == shared);
        GradientSyncOptions options;
        options.bucket_bytes = bucket_bytes;
        options.zero1 = zero1;
        options.shared = shared ? &window : nullptr;
        GradientSync sync(dp, net.store, options);
        auto optimizer =
            make_optimizer(spec, sync.update_size(), sync.gather_shard(net.store.decay_mask()));
        for (int step = 0; step < 3; ++step) {
          reduce_step(net, sync, step);
          if (step == 0) {
            first_grads[shared] = to_host(sync.update_grads());
            CHECK(relative_error(first_grads[shared],
                                 zero1 ? shard_of(sync, expected) : expected) <= 1e-6);
            // Nothing is started from backward: the exchange waits for every rank's buffer.
            if (shared) CHECK(sync.buckets_started_early() == 0);
          }
          optimizer->step(sync.update_params(), sync.update_grads(), 0.05f);
          sync.finish_update();
        }
        params[shared] = to_host(net.store.params());
        // Shared ZeRO-1: the shard is this rank's slice of the parameters themselves.
        if (shared && zero1) {
          CHECK(sync.update_params().data() ==
                net.store.params().data() + dp.rank() * sync.update_size());
          CHECK(sync.update_grads().data() ==
                net.store.grads().data() + dp.rank() * sync.update_size());
          CHECK(sync.bucket_count() == 1);
        }
        // Every rank holds the same whole parameters.
        std::vector<float> lo = params[shared], hi = params[shared];
        MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_FLOAT, MPI_MIN,
                      MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(hi.size()), MPI_FLOAT, MPI_MAX,
                      MPI_COMM_WORLD);
        CHECK(lo == hi);
      }
      // Sums in rank order vs MPI's order: equal up to rounding (exactly equal at 2 ranks).
      // (With zero1 the shards differ in layout: one bucket in shared memory. Each was checked
      // against its own slice of the reference above.)
      if (!zero1) CHECK(relative_error(first_grads[1], first_grads[0]) <= 1e-6);
      CHECK(relative_error(params[1], params[0]) <= 1e-6);
      if (dp.size() <= 2) CHECK(params[1] == params[0]);
    }
  }
}

TEST_CASE("GradientSync rejects a shared window that does not hold its gradients",
          "[dp_sync_mpi]") {
  ProcessGrid grid(MPI_COMM_WORLD, 1, 1);
  Communicator& dp = grid.communicator(Axis::dp);
  if (!kHostMemory) return;
  Net net(dp.size());  // gradients in a buffer of its own
  NodeSharedWindow window(grid.dp(), net.store.buffer_size());
  GradientSyncOptions options;
  options.shared = &window;
  CHECK_THROWS_AS(GradientSync(dp, net.store, options), Error);
  // Room for the gradients but not for ZeRO-1's master shard after them.
  Net small(dp.size(), false);
  NodeSharedWindow short_window(grid.dp(), small.store.buffer_size());
  small.store.finalize(1, short_window.part(dp.rank()));
  options.shared = &short_window;
  CHECK_NOTHROW(GradientSync(dp, small.store, options));
  options.zero1 = true;
  CHECK_THROWS_AS(GradientSync(dp, small.store, options), Error);
  // Room for both, but the parameters live elsewhere: ZeRO-1's peers could not gather them.
  Net apart(dp.size(), false);
  NodeSharedWindow wide_window(grid.dp(), 2 * apart.store.buffer_size());
  apart.store.finalize(1, wide_window.part(dp.rank()));
  options.shared = &wide_window;
  CHECK_THROWS_AS(GradientSync(dp, apart.store, options), Error);
}
