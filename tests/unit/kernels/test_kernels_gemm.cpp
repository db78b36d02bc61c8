#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/gemm.hpp"
#include "trellis/kernels/host_threads.hpp"

#include <dirent.h>

#include <cstdlib>
#include <limits>
#include <vector>

using namespace trellis;
using trellis::test::random_values;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

// Reference: C = alpha op(A) op(B) + beta C, row-major, in double.
std::vector<float> naive_gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                              const std::vector<float>& a, const std::vector<float>& b, float beta,
                              const std::vector<float>& c) {
  std::vector<float> out(c.size());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p) {
        const float av = ta ? a[p * m + i] : a[i * k + p];  // A is [k, m] when transposed
        const float bv = tb ? b[j * k + p] : b[p * n + j];  // B is [n, k] when transposed
        sum += static_cast<double>(av) * bv;
      }
      out[i * n + j] = static_cast<float>(alpha * sum + beta * static_cast<double>(c[i * n + j]));
    }
  }
  return out;
}

void check_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta) {
  const auto a_host = random_values(static_cast<std::size_t>(m * k), 1);
  const auto b_host = random_values(static_cast<std::size_t>(k * n), 2);
  const auto c_host = random_values(static_cast<std::size_t>(m * n), 3);
  FloatView a = to_device("a", a_host), b = to_device("b", b_host), c = to_device("c", c_host);
  const ConstMatrix am = ta ? as_matrix(a, k, m) : as_matrix(a, m, k);
  const ConstMatrix bm = tb ? as_matrix(b, n, k) : as_matrix(b, k, n);
  kernels::gemm(ta, tb, alpha, am, bm, beta, as_matrix(c, m, n));
  const auto expected = naive_gemm(ta, tb, m, n, k, alpha, a_host, b_host, beta, c_host);
  const auto got = to_host(c);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("ta=" << ta << " tb=" << tb << " m=" << m << " n=" << n << " k=" << k << " i=" << i);
    CHECK(got[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-5));
  }
}

// Threads of this process now (the entries of /proc/self/task).
int process_threads() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
    closedir(dir);
  }
  return count;
}

}  // namespace

// One rank per core: the vendor GEMM must not start a thread pool of its own in every rank
// (main() and the test runners call configure_host_threads() after Kokkos).
TEST_CASE("host gemm runs on one thread per rank unless OMP_NUM_THREADS says otherwise",
          "[kernels][gemm][threads]") {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) {
    WARN("OMP_NUM_THREADS is set: the user chose the thread count, nothing to check");
    return;
  }
  CHECK(kernels::host_threads() == 1);
  const int before = process_threads();
  check_case(false, true, 256, 256, 256, 1.0f, 0.0f);
  CHECK(process_threads() == before);
}

TEST_CASE("gemm matches a naive triple loop for all transposes and odd sizes", "[kernels][gemm]") {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      check_case(ta, tb, 7, 5, 3, 1.0f, 0.0f);
      check_case(ta, tb, 1, 9, 13, 0.5f, 1.0f);
      check_case(ta, tb, 33, 17, 65, -1.25f, 0.75f);
      check_case(ta, tb, 5, 1, 1, 2.0f, -1.0f);
    }
  }
}

TEST_CASE("gemm with beta = 0 overwrites C without reading it", "[kernels][gemm]") {
  auto c_host = std::vector<float>(6, std::numeric_limits<float>::quiet_NaN());
  FloatView a = to_device("a", {1, 2, 3, 4}), b = to_device("b", {1, 0, 2, 0, 1, 3});
  FloatView c = to_device("c", c_host);
  kernels::gemm(false, false, 1.0f, as_matrix(a, 2, 2), as_matrix(b, 2, 3), 0.0f,
                as_matrix(c, 2, 3));
  CHECK(to_host(c) == std::vector<float>{1, 2, 8, 3, 4, 18});
}

TEST_CASE("gemm with an empty inner dimension gives beta * C", "[kernels][gemm]") {
  FloatView a("a", 1), b("b", 1), c = to_device("c", {1, 2, 3, 4, 5, 6});
  kernels::gemm(false, false, 1.0f, ConstMatrix(a.data(), 2, 0), ConstMatrix(b.data(), 0, 3), 2.0f,
                as_matrix(c, 2, 3));
  CHECK(to_host(c) == std::vector<float>{2, 4, 6, 8, 10, 12});
  // And m == 0 is a no-op.
  kernels::gemm(false, false, 1.0f, ConstMatrix(a.data(), 0, 1), ConstMatrix(b.data(), 1, 3), 0.0f,
                Matrix(c.data(), 0, 3));
  CHECK(test::get(c, 0) == 2.0f);
}

TEST_CASE("gemm rejects shapes that do not fit, naming them", "[kernels][gemm]") {
  FloatView a("a", 12), b("b", 12), c("c", 12);
  std::string message;
  try {
    kernels::gemm(false, true, 1.0f, as_matrix(a, 3, 4), as_matrix(b, 2, 3), 0.0f,
                  as_matrix(c, 3, 2));
  } catch (const trellis::Error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("gemm") != std::string::npos);
  CHECK(message.find("A [3, 4]") != std::string::npos);
  CHECK(message.find("B [2, 3]") != std::string::npos);
  CHECK(message.find("C [3, 2]") != std::string::npos);
  // Wrong output rows.
  CHECK_THROWS_AS(kernels::gemm(false, false, 1.0f, as_matrix(a, 3, 4), as_matrix(b, 4, 3), 0.0f,
                                as_matrix(c, 4, 3)),
                  trellis::Error);
}
