#include "trellis/parallel/powersgd.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/kernels/gemm.hpp"
#include "trellis/kernels/orthogonalize.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/kernels/vector_ops.hpp"

namespace trellis {

PowerSgd::PowerSgd(Communicator& dp, nn::ParameterStore& store, const PowerSgdOptions& options)
    : dp_(dp), store_(store), r_(options.rank) {
  TRELLIS_REQUIRE(store.finalized(), "PowerSgd: the parameter store must be finalized");
  TRELLIS_REQUIRE(r_ >= 1, "PowerSgd: rank " + std::to_string(r_) + " (need >= 1)");
  std::size_t p_total = 0, q_total = 0, e_total = 0;
  std::vector<bool> compressed(store.size(), false);
  for (std::size_t i = 0; i < store.size(); ++i) {
    const nn::ParamInfo& info = store.info(i);
    if (info.shape.size() < 2 || info.numel == 0) continue;
    const auto n = static_cast<std::size_t>(info.shape[0]);
    const std::size_t m = info.numel / n;
    if (static_cast<double>(n * m) <
        options.min_compression * static_cast<double>((n + m) * static_cast<std::size_t>(r_)))
      continue;
    Item item;
    item.offset = info.offset;
    item.rows = static_cast<int>(n);
    item.cols = static_cast<int>(m);
    item.p = p_total, item.q = q_total, item.e = e_total;
    p_total += n * static_cast<std::size_t>(r_);
    q_total += m * static_cast<std::size_t>(r_);
    e_total += n * m;
    compressed_elements_ += n * m;
    compressed[i] = true;
    items_.push_back(item);
  }
  // The rest of the flat buffer in maximal runs (padding included: it is zero and cheap).
  std::size_t packed = p_total, cursor = 0;
  const auto add_run = [&](std::size_t begin, std::size_t end) {
    if (end <= begin) return;
    runs_.push_back({begin, end, packed});
    packed += end - begin;
  };
  for (const Item& item : items_) {
    add_run(cursor, item.offset);
    cursor =
        item.offset + static_cast<std::size_t>(item.rows) * static_cast<std::size_t>(item.cols);
  }
  add_run(cursor, store.buffer_size());
  first_ = FloatView("trellis::powersgd::p_and_uncompressed", packed);
  q_ = FloatView("trellis::powersgd::q", q_total);
  error_ = FloatView("trellis::powersgd::error", e_total);
  for (std::size_t i = 0, k = 0; i < store.size(); ++i) {
    if (!compressed[i]) continue;
    const Item& item = items_[k++];
    const std::size_t q_size = static_cast<std::size_t>(item.cols) * static_cast<std::size_t>(r_);
    kernels::fill_normal(slice(q_, item.q, item.q + q_size), 0.0f, 1.0f, options.seed,
                         stream_mix(stream_from_name(store.info(i).name), 0x50534744u));
  }
}

void PowerSgd::save_state(kernels::Vector out) const {
  TRELLIS_REQUIRE(out.extent(0) >= state_floats(), "PowerSgd::save_state: buffer too small");
  const std::size_t q = q_.extent(0), e = error_.extent(0);
  kernels::copy(q_, slice(out, 0, q));
  kernels::copy(error_, slice(out, q, q + e));
}

void PowerSgd::load_state(kernels::ConstVector in) {
  TRELLIS_REQUIRE(in.extent(0) >= state_floats(), "PowerSgd::load_state: buffer too small");
  const std::size_t q = q_.extent(0), e = error_.extent(0);
  kernels::copy(slice(in, 0, q), q_);
  kernels::copy(slice(in, q, q + e), error_);
}

void PowerSgd::reduce() {
  float* grads = store_.grads().data();
  const auto r = static_cast<std::size_t>(r_);
  for (const Item& item : items_) {
    const auto n = static_cast<std::size_t>(item.rows), m = static_cast<std::size_t>(item.cols);
    const Matrix grad(grads + item.offset, n, m);
    // M += E, then P = M Q.
    kernels::axpy(1.0f, kernels::ConstVector(error_.data() + item.e, n * m),
                  kernels::Vector(grad.data(), n * m));
    kernels::gemm(false, false, 1.0f, grad, ConstMatrix(q_.data() + item.q, m, r), 0.0f,
                  Matrix(first_.data() + item.p, n, r));
  }
  for (const Run& run : runs_)
    kernels::copy(kernels::ConstVector(grads + run.begin, run.end - run.begin),
                  kernels::Vector(first_.data() + run.packed, run.end - run.begin));
  dp_.all_reduce(first_.data(), first_.extent(0), ReduceOp::sum);
  for (const Run& run : runs_)
    kernels::copy(kernels::ConstVector(first_.data() + run.packed, run.end - run.begin),
                  kernels::Vector(grads + run.begin, run.end - run.begin));
  for (const Item& item : items_) {
    const auto n = static_cast<std::size_t>(item.rows), m = static_cast<std::size_t>(item.cols);
    const Matrix p(first_.data() + item.p, n, r);
    kernels::orthonormalize_columns(p);
    // Q = M^T P
    kernels::gemm(true, false, 1.0f, ConstMatrix(grads + item.offset, n, m), p, 0.0f,
                  Matrix(q_.data() + item.q, m, r));
  }
  dp_.all_reduce(q_.data(), q_.extent(0), ReduceOp::sum);
  for (const Item& item : items_) {
    const auto n = static_cast<std::size_t>(item.rows), m = static_cast<std::size_t>(item.cols);
    const kernels::Vector grad(grads + item.offset, n * m), error(error_.data() + item.e, n * m);
    // E = M (this rank's, error added) - M' / dp: the ranks' errors sum to what the
    // approximation M' = P Q^T of the dp sum left out. Then M := M'.
    kernels::copy(grad, error);
    kernels::gemm(false, true, 1.0f, ConstMatrix(first_.data() + item.p, n, r),
                  ConstMatrix(q_.data() + item.q, m, r), 0.0f, Matrix(grad.data(), n, m));
    kernels::axpy(-1.0f / static_cast<float>(dp_.size()), grad, error);
  }
}

}  // namespace trellis
