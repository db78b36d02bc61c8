// Synchronised BatchNorm: on every rank count, BatchNorm2d (and a whole Cnn) with statistics
// synchronised over the world, each rank holding its slice of a fixed global batch, must give
// the slice of what one process computes on the whole batch: outputs, input gradients, running
// statistics, and parameter gradients once summed over ranks (what the DP all-reduce does).
//
// Only CHECKs (never REQUIRE) once collectives have started, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"

#include "unit/support/nn_helpers.hpp"

#include "trellis/comm/mpi_comm.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <mpi.h>

#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr double kRel = 1e-4, kAbs = 1e-5;

// Rows [begin, end) of a global batch of `total` rows for this rank: uneven when size does
// not divide total, empty when total < size.
struct Slice {
  int begin = 0, end = 0;
  int rows() const { return end - begin; }
};
Slice slice_of(int total, const MpiComm& comm) {
  return Slice{comm.rank() * total / comm.size(), (comm.rank() + 1) * total / comm.size()};
}

std::vector<float> rows_of(const std::vector<float>& all, int cols, Slice s) {
  return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(s.begin) * cols,
                            all.begin() + static_cast<std::ptrdiff_t>(s.end) * cols);
}

// Device buffer of at least one element holding `host` (a rank with no rows still passes a
// valid, empty window).
FloatView device_rows(const std::string& label, const std::vector<float>& host) {
  std::vector<float> padded = host;
  if (padded.empty()) padded.push_back(0.0f);
  return to_device(label, padded);
}

void check_all_close(const std::string& what, const std::vector<float>& actual,
                     const std::vector<float>& expected) {
  CHECK(actual.size() == expected.size());
  int bad = 0;
  for (std::size_t i = 0; i < actual.size() && i < expected.size(); ++i) {
    if (test::close(actual[i], expected[i], kRel, kAbs)) continue;
    if (++bad <= 3) {
      INFO(what << "[" << i << "]: " << actual[i] << " vs " << expected[i]);
      CHECK(test::close(actual[i], expected[i], kRel, kAbs));
    }
  }
  INFO(what << ": " << bad << " elements differ");
  CHECK(bad == 0);
}

// Every parameter gradient of `store`, summed over the ranks of comm.
std::vector<float> summed_grads(const nn::ParameterStore& store, const MpiComm& comm) {
  std::vector<float> g = to_host(store.grads());
  MPI_Allreduce(MPI_IN_PLACE, g.data(), static_cast<int>(g.size()), MPI_FLOAT, MPI_SUM, comm.get());
  return g;
}

void set_params(nn::ParameterStore& store, std::uint64_t stream) {
  for (std::size_t i = 0; i < store.size(); ++i) {
    const bool gamma = store.info(i).name.find(".weight") != std::string::npos;
    Kokkos::deep_copy(store.param(i),
                      to_device("p", random_values(store.info(i).numel, stream + i,
                                                   gamma ? 0.5f : -0.5f, gamma ? 1.5f : 0.5f)));
  }
}

}  // namespace

TEST_CASE("synchronised BatchNorm2d on slices equals one rank on the whole batch",
          "[batchnorm_mpi]") {
  const MpiComm world = MpiComm::duplicate(MPI_COMM_WORLD);
  const int c = 3, h = 4, w = 3, features = c * h * w;
  for (const int total : {10, 3}) {  // 3 < 4 ranks: some ranks hold no rows
    INFO("global batch " << total << " over " << world.size() << " ranks");
    const Slice mine = slice_of(total, world);
    const std::vector<float> x =
        random_values(static_cast<std::size_t>(total * features), 1, -1.0f, 3.0f);
    const std::vector<float> dy = random_values(static_cast<std::size_t>(total * features), 2);

    // Reference: this process alone, whole batch, no communicator.
    nn::ParameterStore ref_store;
    nn::BatchNorm2d ref(ref_store, "bn", c, h, w, total);
    ref_store.finalize(5);
    set_params(ref_store, 10);
    FloatView x_all = to_device("x", x), dy_all = to_device("dy", dy);
    ref.forward(as_matrix(x_all, total, features), total, {});
    ref.backward(as_matrix(dy_all, total, features), total);

    // Synchronised: this rank's slice.
    nn::ParameterStore store;
    nn::BatchNorm2d bn(store, "bn", c, h, w, total, 0.1f, 1e-5f, &world);
    store.finalize(5);
    set_params(store, 10);
    const int n = mine.rows();
    FloatView x_mine = device_rows("x", rows_of(x, features, mine));
    FloatView dy_mine = device_rows("dy", rows_of(dy, features, mine));
    bn.forward(ConstMatrix(x_mine.data(), static_cast<std::size_t>(n), features), n, {});
    bn.backward(ConstMatrix(dy_mine.data(), static_cast<std::size_t>(n), features), n);

    CHECK(bn.batch_count() == static_cast<double>(total * h * w));
    check_all_close("y", to_host(first_rows(bn.output(), n)),
                    rows_of(to_host(first_rows(ref.output(), total)), features, mine));
    check_all_close("dx", to_host(first_rows(bn.input_grad(), n)),
                    rows_of(to_host(first_rows(ref.input_grad(), total)), features, mine));
    check_all_close("summed param grads", summed_grads(store, world), to_host(ref_store.grads()));
    check_all_close("running stats", to_host(bn.running_stats()), to_host(ref.running_stats()));

    // Eval mode uses the (identical) running statistics and no communication.
    nn::StepContext eval;
    eval.training = false;
    bn.forward(ConstMatrix(x_mine.data(), static_cast<std::size_t>(n), features), n, eval);
    ref.forward(as_matrix(x_all, total, features), total, eval);
    check_all_close("eval y", to_host(first_rows(bn.output(), n)),
                    rows_of(to_host(first_rows(ref.output(), total)), features, mine));
  }
}

TEST_CASE("a Cnn with sync_bn on slices equals one rank on the whole batch", "[batchnorm_mpi]") {
  const MpiComm world = MpiComm::duplicate(MPI_COMM_WORLD);
  nn::CnnSpec spec;
  spec.channels = 2;
  spec.height = spec.width = 6;
  spec.classes = 3;
  spec.widths = {3, 4};
  spec.blocks_per_stage = 1;
  spec.input_grad = true;  // compared below
  const int total = 8, features = 2 * 36;
  spec.capacity = total;
  const Slice mine = slice_of(total, world);
  const std::vector<float> x = random_values(static_cast<std::size_t>(total * features), 3);
  const std::vector<float> dlogits = random_values(static_cast<std::size_t>(total * 3), 4);
  const nn::StepContext ctx;

  nn::ParameterStore ref_store;
  nn::Cnn ref(spec, ref_store);
  ref_store.finalize(21);
  FloatView x_all = to_device("x", x), dl_all = to_device("dl", dlogits);
  const std::vector<float> ref_logits =
      to_host(ref.forward(as_matrix(x_all, total, features), total, ctx));
  ref.backward(as_matrix(dl_all, total, 3), total);

  nn::CnnSpec dp_spec = spec;
  dp_spec.sync_bn = true;
  dp_spec.dp = &world;
  nn::ParameterStore store;
  nn::Cnn model(dp_spec, store);
  store.finalize(21);  // same seed and names: the same initial parameters
  const int n = mine.rows();
  FloatView x_mine = device_rows("x", rows_of(x, features, mine));
  FloatView dl_mine = device_rows("dl", rows_of(dlogits, 3, mine));
  const std::vector<float> logits = to_host(
      model.forward(ConstMatrix(x_mine.data(), static_cast<std::size_t>(n), features), n, ctx));
  model.backward(ConstMatrix(dl_mine.data(), static_cast<std::size_t>(n), 3), n);

  check_all_close("logits", logits, rows_of(ref_logits, 3, mine));
  check_all_close("input grad", to_host(first_rows(model.input_grad(), n)),
                  rows_of(to_host(first_rows(ref.input_grad(), total)), features, mine));
  check_all_close("summed param grads", summed_grads(store, world), to_host(ref_store.grads()));
  const auto buffers = model.buffers(), ref_buffers = ref.buffers();
  CHECK(buffers.size() == ref_buffers.size());
  for (std::size_t i = 0; i < buffers.size() && i < ref_buffers.size(); ++i) {
    check_all_close(buffers[i].name, to_host(buffers[i].data), to_host(ref_buffers[i].data));
  }
}
