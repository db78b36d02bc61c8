#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/softmax_xent.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace trellis;
using trellis::test::labels_to_device;
using trellis::test::to_device;
using trellis::test::to_host;

TEST_CASE("softmax cross-entropy matches a hand computation", "[kernels][xent]") {
  // Row 0: logits 1,2,3 label 2 (argmax 2: correct). Row 1: all equal, label 1 (argmax is the
  // first index 0: wrong). Row 2: label 0, argmax 0 (correct).
  FloatView logits = to_device("logits", {1, 2, 3, 1, 1, 1, 5, -1, 0});
  IntView labels = labels_to_device({2, 1, 0});
  const auto result = kernels::softmax_xent_forward(as_matrix(logits, 3, 3), labels);
  const double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;  // 0.40760596
  const double row1 = std::log(3.0);
  const double row2 = std::log(std::exp(5.0) + std::exp(-1.0) + 1.0) - 5.0;
  CHECK(result.loss_sum == Approx(row0 + row1 + row2).epsilon(1e-6));
  CHECK(result.correct == 2);

  FloatView dlogits("dlogits", 9);
  kernels::softmax_xent_backward(as_matrix(logits, 3, 3), labels, 0.5f, as_matrix(dlogits, 3, 3));
  const auto d = to_host(dlogits);
  const double z0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(d[0] == Approx(0.5 * std::exp(1.0) / z0).epsilon(1e-5));
  CHECK(d[1] == Approx(0.5 * std::exp(2.0) / z0).epsilon(1e-5));
  CHECK(d[2] == Approx(0.5 * (std::exp(3.0) / z0 - 1.0)).epsilon(1e-5));
  CHECK(d[3] == Approx(0.5 / 3.0).epsilon(1e-5));
  CHECK(d[4] == Approx(0.5 * (1.0 / 3.0 - 1.0)).epsilon(1e-5));
  // Each row of (softmax - onehot) sums to zero.
  for (int r = 0; r < 3; ++r)
    CHECK(d[3 * r] + d[3 * r + 1] + d[3 * r + 2] == Approx(0.0).margin(1e-6));
}

TEST_CASE("softmax cross-entropy is stable for large logits", "[kernels][xent]") {
  FloatView logits = to_device("logits", {1000, 1001, -1000, 1000});
  IntView labels = labels_to_device({0, 1});
  const auto result = kernels::softmax_xent_forward(as_matrix(logits, 2, 2), labels);
  CHECK(std::isfinite(result.loss_sum));
  CHECK(result.loss_sum == Approx(1.0 + std::log1p(std::exp(-1.0))).epsilon(1e-5));
  FloatView d("d", 4);
  kernels::softmax_xent_backward(as_matrix(logits, 2, 2), labels, 1.0f, as_matrix(d, 2, 2));
  for (float v : to_host(d)) CHECK(std::isfinite(v));
}

TEST_CASE("an out-of-range label raises InputError naming value and row", "[kernels][xent]") {
  FloatView logits = to_device("logits", std::vector<float>(12, 0.0f));  // [4, 3]
  for (int bad : {3, -1, 42}) {
    IntView labels = labels_to_device({0, 2, bad, 1});
    std::string message;
    try {
      kernels::softmax_xent_forward(as_matrix(logits, 4, 3), labels);
    } catch (const trellis::InputError& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("label " + std::to_string(bad)) != std::string::npos);
    CHECK(message.find("row 2") != std::string::npos);
    CHECK(message.find("[0, 3)") != std::string::npos);
  }
  // The first bad row is reported when there are several.
  IntView labels = labels_to_device({0, 7, 9, 1});
  CHECK_THROWS_AS(kernels::softmax_xent_forward(as_matrix(logits, 4, 3), labels),
                  trellis::InputError);
  try {
    kernels::softmax_xent_forward(as_matrix(logits, 4, 3), labels);
  } catch (const trellis::InputError& e) {
    CHECK(std::string(e.what()).find("label 7 at row 1") != std::string::npos);
  }
  // Zero rows: nothing to check, nothing to add.
  const auto empty = kernels::softmax_xent_forward(as_matrix(logits, 0, 3), labels);
  CHECK(empty.loss_sum == 0.0);
  CHECK(empty.correct == 0);
}

// Wide rows take the host bodies' vector loops (16 columns at a time, then a tail): loss,
// correct count and gradient against double precision, with the row maximum tied across
// vectors (the first column must win) and the label in the tail.
TEST_CASE("softmax cross-entropy on wide rows matches double precision", "[kernels][xent]") {
  for (int classes : {16, 37, 256}) {
    INFO("classes " << classes);
    const int rows = 5;
    std::vector<float> z(static_cast<std::size_t>(rows * classes));
    for (std::size_t e = 0; e < z.size(); ++e)
      z[e] = static_cast<float>(std::sin(0.7 * static_cast<double>(e)) * 4.0);
    std::vector<int> labels(rows), expected_argmax(rows);
    for (int r = 0; r < rows; ++r) {
      float* row = z.data() + r * classes;
      const int first = (3 * r + 2) % classes, second = (first + 17) % classes;
      row[first] = row[second] = 9.0f;  // tied maxima, 17 columns apart
      expected_argmax[static_cast<std::size_t>(r)] = std::min(first, second);
      labels[static_cast<std::size_t>(r)] = r % 2 == 0 ? std::min(first, second) : classes - 1;
    }
    double loss = 0.0;
    int correct = 0;
    std::vector<double> grad(z.size());
    for (int r = 0; r < rows; ++r) {
      const float* row = z.data() + r * classes;
      double sum = 0.0;
      for (int j = 0; j < classes; ++j) sum += std::exp(double(row[j]) - 9.0);
      const int label = labels[static_cast<std::size_t>(r)];
      loss += std::log(sum) + 9.0 - row[label];
      if (label == expected_argmax[static_cast<std::size_t>(r)]) ++correct;
      for (int j = 0; j < classes; ++j)
        grad[static_cast<std::size_t>(r * classes + j)] =
            0.25 * (std::exp(double(row[j]) - 9.0) / sum - (j == label ? 1.0 : 0.0));
    }
    FloatView logits = to_device("logits", z);
    IntView label_view = labels_to_device(labels);
    const auto result = kernels::softmax_xent_forward(as_matrix(logits, rows, classes), label_view);
    CHECK(result.loss_sum == Approx(loss).epsilon(1e-6));
    CHECK(result.correct == correct);
    FloatView d("d", z.size());
    kernels::softmax_xent_backward(as_matrix(logits, rows, classes), label_view, 0.25f,
                                   as_matrix(d, rows, classes));
    const auto got = to_host(d);
    double worst = 0.0;
    for (std::size_t e = 0; e < z.size(); ++e)
      worst = std::max(worst, std::abs(double(got[e]) - grad[e]));
    CHECK(worst < 1e-6);
  }
}
