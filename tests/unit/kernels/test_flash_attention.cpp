// The flash attention kernels (kernels/flash_attention.hpp) against the materialised path
// they replaced (split heads, stacked GEMMs into [S*H*T, T] scores, causal softmax, dropout,
// PV, merge; kernels/attention.hpp), forward and backward, over shapes that exercise partial
// tiles, a sequence shorter than a tile, several heads and sequences, hd = 8/32/64, with and
// without dropout; the logsumexp against a double-precision sum. Grouped-query attention against
// the same reference on k/v repeated per query head (dk/dv of a kv head: the sum over its query
// heads).
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/attention/attention.hpp"
#include "trellis/kernels/attention/flash_attention.hpp"
#include "trellis/kernels/attention/qkv_layout.hpp"

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
  int kv_heads = 0;  // 0: heads (multi-head attention)
};

int kv_heads(const Case& c) { return c.kv_heads == 0 ? c.heads : c.kv_heads; }
int qkv_width(const Case& c) { return (c.heads + 2 * kv_heads(c)) * c.head_dim; }

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

// qkv [n, (H + 2 KVH) hd] (grouped layout, kernels/qkv_layout.hpp) -> [n, 3 H hd] with kv
// head h / g repeated for query head h.
std::vector<float> repeat_kv(const Case& c, const std::vector<float>& qkv) {
  const int T = c.seq_len, H = c.heads, hd = c.head_dim, g = H / kv_heads(c), d = H * hd;
  const int n = c.sequences * T, width = qkv_width(c);
  const kernels::QkvLayout L{H, kv_heads(c), hd};
  std::vector<float> full(sz(n) * sz(3 * d));
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < hd; ++i) {
        const std::size_t src = sz(r) * sz(width), dst = sz(r) * sz(3 * d), col = sz(h * hd + i);
        full[dst + col] = qkv[src + sz(L.q_col(h) + i)];
        full[dst + sz(d) + col] = qkv[src + sz(L.k_col(h / g) + i)];
        full[dst + sz(2 * d) + col] = qkv[src + sz(L.v_col(h / g) + i)];
      }
  return full;
}

// dqkv [n, 3 H hd] of the repeated k/v -> [n, (H + 2 KVH) hd]: dk/dv of kv head j summed
// (in double) over query heads [j g, (j + 1) g).
std::vector<float> sum_kv(const Case& c, const std::vector<float>& full) {
  const int T = c.seq_len, H = c.heads, hd = c.head_dim, g = H / kv_heads(c), d = H * hd;
  const int n = c.sequences * T, width = qkv_width(c);
  const kernels::QkvLayout L{H, kv_heads(c), hd};
  std::vector<float> dqkv(sz(n) * sz(width));
  for (int r = 0; r < n; ++r) {
    const float* src = full.data() + sz(r) * sz(3 * d);
    float* dst = dqkv.data() + sz(r) * sz(width);
    for (int h = 0; h < H; ++h) std::copy(src + h * hd, src + (h + 1) * hd, dst + L.q_col(h));
    for (int j = 0; j < kv_heads(c); ++j)
      for (int i = 0; i < hd; ++i) {
        double dk = 0.0, dv = 0.0;
        for (int h = j * g; h < (j + 1) * g; ++h) {
          dk += src[d + h * hd + i];
          dv += src[2 * d + h * hd + i];
        }
        dst[L.k_col(j) + i] = static_cast<float>(dk);
        dst[L.v_col(j) + i] = static_cast<float>(dv);
      }
  }
  return dqkv;
}

// The reference for any kv head count (qkv in the flash layout).
Result expected(const Case& c, const std::vector<float>& qkv_host, const FloatView& dout) {
  if (kv_heads(c) == c.heads) return reference(c, to_device("qkv", qkv_host), dout);
  Result full = reference(c, to_device("qkv_full", repeat_kv(c, qkv_host)), dout);
  return {full.out, sum_kv(c, full.dqkv)};
}

// out and dqkv of the flash kernels (forward then backward); lse: the forward's.
Result run_flash(const Case& c, const std::vector<float>& qkv_host, const FloatView& dout,
                 std::vector<float>* lse_host = nullptr) {
  const int T = c.seq_len, H = c.heads, d = H * c.head_dim, n = c.sequences * T;
  const int width = qkv_width(c);
  FloatView qkv = to_device("qkv", qkv_host);
  FloatView out("out", sz(n) * sz(d)), lse("lse", sz(n) * sz(H)), delta("delta", sz(n) * sz(H));
  // dqkv starts as garbage: the kernel must overwrite every element.
  FloatView dqkv = to_device("dqkv", random_values(sz(n) * sz(width), 43, 5.0f, 9.0f));
  const ConstMatrix qkv_m(qkv.data(), sz(n), sz(width));
  const kernels::FlashAttentionShape shape{H, T, c.kv_heads};
  kernels::flash_attention_forward(qkv_m, shape, Matrix(out.data(), sz(n), sz(d)),
                                   Vector(lse.data(), sz(n) * sz(H)), mask_for(c));
  kernels::flash_attention_backward(
      qkv_m, ConstMatrix(out.data(), sz(n), sz(d)), ConstMatrix(dout.data(), sz(n), sz(d)),
      ConstVector(lse.data(), sz(n) * sz(H)), shape, Vector(delta.data(), sz(n) * sz(H)),
      Matrix(dqkv.data(), sz(n), sz(width)), mask_for(c));
  if (lse_host != nullptr) *lse_host = to_host(lse);
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
  INFO("sequences " << c.sequences << ", heads " << c.heads << ", kv heads " << kv_heads(c)
                    << ", T " << c.seq_len << ", hd " << c.head_dim << ", dropout " << c.dropout);
  const int T = c.seq_len, H = c.heads, hd = c.head_dim, d = H * hd, n = c.sequences * T;
  const int width = qkv_width(c), g = H / kv_heads(c);
  const std::vector<float> qkv_host = random_values(sz(n) * sz(width), 41, -1.5f, 1.5f);
  FloatView dout = to_device("dout", random_values(sz(n) * sz(d), 42));
  const Result want = expected(c, qkv_host, dout);
  std::vector<float> lse_host;
  const Result got = run_flash(c, qkv_host, dout, &lse_host);
  require_close("out", got.out, want.out);
  require_close("dqkv", got.dqkv, want.dqkv);

  // lse of (b, h, t) = log sum_{j <= t} exp(q_t . k_j / sqrt(hd)) (k of kv head h / g), in double.
  const kernels::QkvLayout L{H, kv_heads(c), hd};
  double worst = 0.0;
  for (int b = 0; b < c.sequences; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> s(sz(t + 1));
        double m = -1e300;
        for (int j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int i = 0; i < hd; ++i) {
            dot += double(qkv_host[sz(b * T + t) * sz(width) + sz(L.q_col(h) + i)]) *
                   qkv_host[sz(b * T + j) * sz(width) + sz(L.k_col(h / g) + i)];
          }
          s[sz(j)] = dot / std::sqrt(double(hd));
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

// Query head h reads kv head h / g; the cases straddle the 64-row host tile and the 32-row
// team tile (T 70, 129), cover multi-query (one kv head), the sgemm forward (hd 8) and the
// team kernels (hd 160).
TEST_CASE("grouped-query flash attention matches the materialised attention on repeated k/v",
          "[flash][attention][gqa]") {
  SECTION("multi-query, 4 heads, T 70, hd 16") { check_case({2, 4, 70, 16, 0.0f, 1}); }
  SECTION("4 heads over 2 kv heads, T 129, hd 32") { check_case({1, 4, 129, 32, 0.0f, 2}); }
  SECTION("8 heads over 2 kv heads, T 70, hd 64, dropout") { check_case({2, 8, 70, 64, 0.2f, 2}); }
  SECTION("multi-query, 8 heads, T 129, hd 32, dropout") { check_case({2, 8, 129, 32, 0.1f, 1}); }
  SECTION("kv heads = heads given explicitly, T 70, hd 16, dropout") {
    check_case({2, 4, 70, 16, 0.2f, 4});
  }
  SECTION("8 heads over 4 kv heads, T smaller than a tile, hd 64, dropout") {
    check_case({3, 8, 5, 64, 0.5f, 4});
  }
  SECTION("multi-query, T = 1") { check_case({2, 4, 1, 16, 0.0f, 1}); }
  SECTION("4 heads over 2 kv heads, hd 8 (sgemm tiles), T 70") {
    check_case({2, 4, 70, 8, 0.0f, 2});
  }
  SECTION("hd 160 (team kernels), 4 heads over 2 kv heads, dropout") {
    check_case({1, 4, 73, 160, 0.3f, 2});
  }
  SECTION("hd 160 (team kernels), multi-query, T 129") { check_case({1, 4, 129, 160, 0.0f, 1}); }
}

// The kernels against themselves: GQA equals multi-head attention on the repeated k/v, with
// a kv head's dk/dv the sum of the repeated heads' (the reference sums in double).
TEST_CASE("grouped-query flash attention: a shared kv head's dk/dv sum over its query heads",
          "[flash][attention][gqa]") {
  for (const Case c :
       {Case{2, 8, 70, 32, 0.2f, 2}, Case{1, 4, 129, 16, 0.0f, 1}, Case{1, 4, 70, 160, 0.1f, 2}}) {
    INFO("heads " << c.heads << ", kv heads " << c.kv_heads << ", T " << c.seq_len << ", hd "
                  << c.head_dim);
    const int n = c.sequences * c.seq_len, d = c.heads * c.head_dim;
    const std::vector<float> qkv_host = random_values(sz(n) * sz(qkv_width(c)), 51, -1.5f, 1.5f);
    FloatView dout = to_device("dout", random_values(sz(n) * sz(d), 52));
    Case mha = c;
    mha.kv_heads = 0;
    const Result full = run_flash(mha, repeat_kv(c, qkv_host), dout);
    const Result got = run_flash(c, qkv_host, dout);
    require_close("out", got.out, full.out);
    require_close("dqkv", got.dqkv, sum_kv(c, full.dqkv));
  }
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

  // Grouped-query: qkv [6, 16] = (2 heads + 2 * 1 kv head) * hd 4, out [6, 8].
  FloatView qkv_g("qkv_g", 6 * 16), out_g("out_g", 6 * 8);
  const ConstMatrix qkv_gm(qkv_g.data(), 6, 16);
  const Matrix out_gm(out_g.data(), 6, 8);
  const Vector lse_g(lse.data(), 12);
  CHECK_NOTHROW(kernels::flash_attention_forward(qkv_gm, {2, 3, 1}, out_gm, lse_g, {}));
  // 2 heads do not split over 4 kv heads (nor 3 over 2).
  CHECK_THROWS_AS(kernels::flash_attention_forward(qkv_gm, {2, 3, 4}, out_gm, lse_g, {}), Error);
  CHECK_THROWS_AS(kernels::flash_attention_forward(qkv_gm, {3, 3, 2}, out_gm, lse_g, {}), Error);
  // 16 columns are no multiple of 2 + 2 * 2 heads (the multi-head layout of 2 heads).
  CHECK_THROWS_AS(kernels::flash_attention_forward(qkv_gm, {2, 3}, out_gm, lse_g, {}), Error);
  CHECK_THROWS_AS(kernels::flash_attention_forward(qkv_gm, {2, 3, -1}, out_gm, lse_g, {}), Error);
  // The output is [n, heads hd] = [6, 8], not [6, 4]; the message names the kv heads.
  CHECK_THROWS_WITH(kernels::flash_attention_forward(qkv_gm, {2, 3, 1}, out_m, lse_g, {}),
                    Catch::Contains("1 kv heads") && Catch::Contains("[6, 16]"));
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
