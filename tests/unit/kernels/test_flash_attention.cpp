// The flash attention kernels (kernels/flash_attention.hpp) against the materialised path
// they replaced (split heads, stacked GEMMs into [S*H*T, T] scores, causal softmax, dropout,
// PV, merge; kernels/attention.hpp), forward and backward, over shapes that exercise partial
// tiles, a sequence shorter than a tile, several heads and sequences, hd = 8/32/64, with and
// without dropout; the logsumexp against a double-precision sum.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/attention.hpp"
#include "trellis/kernels/flash_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace trellis;
using kernels::ConstVector;
using kernels::Vector;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

struct Case {
  int sequences, heads, seq_len, head_dim;
  float dropout;
};

struct Result {
  std::vector<float> out, dqkv;
};

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

kernels::DropoutMask mask_for(const Case& c) {
  if (c.dropout == 0.0f) return {};
  kernels::DropoutMask mask{c.dropout, 1234, 99, static_cast<std::uint64_t>(3 * c.heads)};
  return mask;
}

// The materialised reference (the layer's path before the flash kernel).
Result reference(const Case& c, const FloatView& qkv, const FloatView& dout) {
  const int T = c.seq_len, H = c.heads, hd = c.head_dim, d = H * hd, n = c.sequences * T;
  const int batch = c.sequences * H;
  const std::size_t rows = sz(n), heads_size = rows * sz(d), att_rows = sz(batch) * sz(T);
  const ConstMatrix qkv_m(qkv.data(), rows, sz(3 * d));
  FloatView q("q", heads_size), k("k", heads_size), v("v", heads_size), yh("yh", heads_size);
  kernels::split_heads(qkv_m, 0, d, H, T, Vector(q.data(), heads_size));
  kernels::split_heads(qkv_m, d, d, H, T, Vector(k.data(), heads_size));
  kernels::split_heads(qkv_m, 2 * d, d, H, T, Vector(v.data(), heads_size));
  const ConstMatrix qm(q.data(), att_rows, sz(hd)), km(k.data(), att_rows, sz(hd)),
      vm(v.data(), att_rows, sz(hd));
  FloatView att("att", att_rows * sz(T)), attd("attd", att_rows * sz(T));
  const Matrix att_m(att.data(), att_rows, sz(T)), attd_m(attd.data(), att_rows, sz(T));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  kernels::gemm_batched(false, true, scale, qm, km, 0.0f, att_m, batch);
  kernels::causal_softmax_forward(att_m);
  const kernels::DropoutMask mask = mask_for(c);
  if (c.dropout > 0.0f) {
    kernels::causal_dropout_apply(att_m, attd_m, mask);
  } else {
    Kokkos::deep_copy(attd, att);
  }
  kernels::gemm_batched(false, false, 1.0f, attd_m, vm, 0.0f, Matrix(yh.data(), att_rows, sz(hd)),
                        batch);
  FloatView out("out", rows * sz(d));
  kernels::merge_heads(ConstVector(yh.data(), heads_size), d, H, T, Matrix(out.data(), rows, sz(d)),
                       0);

  FloatView dyh("dyh", heads_size), dq("dq", heads_size), dk("dk", heads_size),
      dv("dv", heads_size), datt("datt", att_rows * sz(T));
  kernels::split_heads(ConstMatrix(dout.data(), rows, sz(d)), 0, d, H, T,
                       Vector(dyh.data(), heads_size));
  const ConstMatrix dyh_m(dyh.data(), att_rows, sz(hd));
  const Matrix datt_m(datt.data(), att_rows, sz(T));
  kernels::gemm_batched(true, false, 1.0f, attd_m, dyh_m, 0.0f, Matrix(dv.data(), att_rows, sz(hd)),
                        batch);
  kernels::gemm_batched(false, true, 1.0f, dyh_m, vm, 0.0f, datt_m, batch);
  if (c.dropout > 0.0f) kernels::causal_dropout_apply(datt_m, datt_m, mask);
  kernels::causal_softmax_backward(att_m, datt_m);
  kernels::gemm_batched(false, false, scale, datt_m, km, 0.0f, Matrix(dq.data(), att_rows, sz(hd)),
                        batch);
  kernels::gemm_batched(true, false, scale, datt_m, qm, 0.0f, Matrix(dk.data(), att_rows, sz(hd)),
                        batch);
  FloatView dqkv("dqkv", rows * sz(3 * d));
  const Matrix dqkv_m(dqkv.data(), rows, sz(3 * d));
  kernels::merge_heads(ConstVector(dq.data(), heads_size), d, H, T, dqkv_m, 0);
  kernels::merge_heads(ConstVector(dk.data(), heads_size), d, H, T, dqkv_m, d);
  kernels::merge_heads(ConstVector(dv.data(), heads_size), d, H, T, dqkv_m, 2 * d);
  return {to_host(out), to_host(dqkv)};
}

void require_close(const std::string& what, const std::vector<float>& got,
                   const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  std::size_t worst = 0;
  double worst_excess = -1.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = 2e-5 + 1e-4 * std::fabs(want[i]);
    const double excess = std::fabs(double(got[i]) - want[i]) - tol;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  INFO(what << " element " << worst << ": flash " << got[worst] << ", reference " << want[worst]);
  CHECK(got[worst] == Approx(want[worst]).margin(2e-5).epsilon(1e-4));
}

void check_case(const Case& c) {
  INFO("sequences " << c.sequences << ", heads " << c.heads << ", T " << c.seq_len << ", hd "
                    << c.head_dim << ", dropout " << c.dropout);
  const int T = c.seq_len, H = c.heads, d = H * c.head_dim, n = c.sequences * T;
  const std::vector<float> qkv_host = random_values(sz(n) * sz(3 * d), 41, -1.5f, 1.5f);
  FloatView qkv = to_device("qkv", qkv_host);
  FloatView dout = to_device("dout", random_values(sz(n) * sz(d), 42));
  const Result want = reference(c, qkv, dout);

  FloatView out("out", sz(n) * sz(d)), lse("lse", sz(n) * sz(H)), delta("delta", sz(n) * sz(H));
  // dqkv starts as garbage: the kernel must overwrite every element.
  FloatView dqkv = to_device("dqkv", random_values(sz(n) * sz(3 * d), 43, 5.0f, 9.0f));
  const ConstMatrix qkv_m(qkv.data(), sz(n), sz(3 * d));
  const kernels::FlashAttentionShape shape{H, T};
  kernels::flash_attention_forward(qkv_m, shape, Matrix(out.data(), sz(n), sz(d)),
                                   Vector(lse.data(), sz(n) * sz(H)), mask_for(c));
  kernels::flash_attention_backward(
      qkv_m, ConstMatrix(out.data(), sz(n), sz(d)), ConstMatrix(dout.data(), sz(n), sz(d)),
      ConstVector(lse.data(), sz(n) * sz(H)), shape, Vector(delta.data(), sz(n) * sz(H)),
      Matrix(dqkv.data(), sz(n), sz(3 * d)), mask_for(c));
  require_close("out", to_host(out), want.out);
  require_close("dqkv", to_host(dqkv), want.dqkv);

  // lse of (b, h, t) = log sum_{j <= t} exp(q_t . k_j / sqrt(hd)), in double.
  const auto lse_host = to_host(lse);
  double worst = 0.0;
  for (int b = 0; b < c.sequences; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> s(sz(t + 1));
        double m = -1e300;
        for (int j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int i = 0; i < c.head_dim; ++i) {
            dot += double(qkv_host[sz(b * T + t) * sz(3 * d) + sz(h * c.head_dim + i)]) *
                   qkv_host[sz(b * T + j) * sz(3 * d) + sz(d + h * c.head_dim + i)];
          }
          s[sz(j)] = dot / std::sqrt(double(c.head_dim));
          m = std::max(m, s[sz(j)]);
        }
        double sum = 0.0;
        for (double x : s) sum += std::exp(x - m);
        const double diff = std::fabs(lse_host[sz((b * H + h) * T + t)] - (m + std::log(sum)));
        worst = std::max(worst, diff);
      }
  CHECK(worst < 2e-5);
}

}  // namespace

TEST_CASE("flash attention matches the materialised softmax attention", "[flash][attention]") {
  const int tile = 64;  // the host tile; the cases straddle it
  SECTION("T a multiple of no tile, several heads and sequences, hd 8") {
    check_case({2, 3, tile + 6, 8, 0.0f});
  }
  SECTION("T smaller than a tile, hd 32") { check_case({3, 2, 5, 32, 0.0f}); }
  SECTION("T of exactly two tiles, hd 64 (GPT-2's head size)") {
    check_case({2, 2, 2 * tile, 64, 0.0f});
  }
  SECTION("three tiles plus one row, one sequence") { check_case({1, 4, 2 * tile + 1, 16, 0.0f}); }
  SECTION("T = 1") { check_case({2, 2, 1, 8, 0.0f}); }
  SECTION("dropout, T a multiple of no tile") { check_case({2, 3, tile + 6, 8, 0.2f}); }
  SECTION("dropout, T smaller than a tile, hd 32") { check_case({3, 2, 5, 32, 0.5f}); }
  SECTION("dropout, hd 64, two tiles") { check_case({1, 2, 2 * tile, 64, 0.1f}); }
  // The vector tile products at 3 and 8 vectors per row (hd 48, 128), rows in groups of 4 / 2.
  SECTION("hd 48 with dropout, two tiles plus 5") { check_case({1, 2, 2 * tile + 5, 48, 0.2f}); }
  SECTION("hd 128, the largest host head") { check_case({2, 1, tile + 11, 128, 0.0f}); }
  // Above the host bodies' largest head dimension the team kernels run (on the host too).
  SECTION("hd 160: the team kernels") { check_case({2, 2, tile + 9, 160, 0.0f}); }
  SECTION("hd 160 with dropout: the team kernels") { check_case({1, 2, 2 * tile + 3, 160, 0.3f}); }
}

TEST_CASE("flash attention rejects shapes that do not fit", "[flash][attention]") {
  FloatView qkv("qkv", 6 * 12), out("out", 6 * 4), lse("lse", 6 * 2);
  const ConstMatrix qkv_m(qkv.data(), 6, 12);
  const Matrix out_m(out.data(), 6, 4);
  // 6 rows are no whole sequences of 4.
  CHECK_THROWS_AS(
      kernels::flash_attention_forward(qkv_m, {2, 4}, out_m, Vector(lse.data(), 12), {}), Error);
  // 4 columns do not split into 3 heads.
  CHECK_THROWS_AS(
      kernels::flash_attention_forward(qkv_m, {3, 3}, out_m, Vector(lse.data(), 12), {}), Error);
  // lse too short for 2 heads.
  CHECK_THROWS_AS(kernels::flash_attention_forward(qkv_m, {2, 3}, out_m, Vector(lse.data(), 6), {}),
                  Error);
  CHECK_NOTHROW(kernels::flash_attention_forward(qkv_m, {2, 3}, out_m, Vector(lse.data(), 12), {}));
}

// Not run by default: `trellis_unit_tests "[flash-bench]"` prints the median time of one
// forward + backward of each path at the GPT configs' shapes (gpt_char: 16 x 4 heads, T 128,
// hd 32; gpt_small: one sequence of 12 heads, T 1024, hd 64).
TEST_CASE("flash attention vs the materialised path: time per forward + backward",
          "[.][flash-bench]") {
  for (const Case c : {Case{16, 4, 128, 32, 0.0f}, Case{1, 12, 1024, 64, 0.0f}}) {
    const int T = c.seq_len, H = c.heads, d = H * c.head_dim, n = c.sequences * T;
    FloatView qkv = to_device("qkv", random_values(sz(n) * sz(3 * d), 41, -1.5f, 1.5f));
    FloatView dout = to_device("dout", random_values(sz(n) * sz(d), 42));
    FloatView out("out", sz(n) * sz(d)), lse("lse", sz(n) * sz(H)), delta("delta", sz(n) * sz(H));
    FloatView dqkv("dqkv", sz(n) * sz(3 * d));
    const ConstMatrix qkv_m(qkv.data(), sz(n), sz(3 * d));
    const kernels::FlashAttentionShape shape{H, T};
    auto median_ms = [](auto&& run) {
      std::vector<double> ms;
      for (int rep = 0; rep < 7; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        run();
        Kokkos::fence();
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    const double fwd = median_ms([&] {
      kernels::flash_attention_forward(qkv_m, shape, Matrix(out.data(), sz(n), sz(d)),
                                       Vector(lse.data(), sz(n) * sz(H)), {});
    });
    const double bwd = median_ms([&] {
      kernels::flash_attention_backward(
          qkv_m, ConstMatrix(out.data(), sz(n), sz(d)), ConstMatrix(dout.data(), sz(n), sz(d)),
          ConstVector(lse.data(), sz(n) * sz(H)), shape, Vector(delta.data(), sz(n) * sz(H)),
          Matrix(dqkv.data(), sz(n), sz(3 * d)), {});
    });
    const double ref = median_ms([&] { reference(c, qkv, dout); });
    std::printf(
        "S %d H %d T %d hd %d: flash fwd %.2f ms, bwd %.2f ms; materialised fwd+bwd %.2f "
        "ms (incl. its buffer allocation)\n",
        c.sequences, H, T, c.head_dim, fwd, bwd, ref);
  }
}
