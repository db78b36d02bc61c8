#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/core/error.hpp"
#include "trellis/kernels/vector_ops.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace trellis;
using trellis::nn::InitSpec;
using trellis::nn::ParameterStore;
using trellis::test::to_host;

namespace {

struct Entry {
  std::string name;
  Shape shape;
  InitSpec init;
  bool decay;
};

std::vector<Entry> model_entries() {
  return {{"fc1.weight", {7, 5}, InitSpec::kaiming_uniform(5), true},
          {"fc1.bias", {7}, InitSpec::uniform(-0.5, 0.25), false},
          {"fc2.weight", {3, 7}, InitSpec::xavier_uniform(7, 3), true},
          {"fc2.bias", {3}, InitSpec::constant(0.125), false},
          {"emb.weight", {17, 2}, InitSpec::normal(0.02), true},
          {"ln.bias", {1}, InitSpec::zeros(), false}};
}

std::map<std::string, std::vector<float>> values_by_name(const ParameterStore& store) {
  std::map<std::string, std::vector<float>> out;
  for (std::size_t i = 0; i < store.size(); ++i) out[store.info(i).name] = to_host(store.param(i));
  return out;
}

}  // namespace

TEST_CASE("parameter store offsets are aligned and non-overlapping", "[nn][params]") {
  ParameterStore store;
  for (const auto& e : model_entries()) store.add(e.name, e.shape, e.init, e.decay);
  store.finalize(1);
  std::size_t end = 0, total = 0;
  for (std::size_t i = 0; i < store.size(); ++i) {
    const auto& p = store.info(i);
    CHECK(p.offset % ParameterStore::kAlignment == 0);
    CHECK(p.offset >= end);  // registration order, no overlap
    CHECK(p.numel == static_cast<std::size_t>(shape_numel(p.shape)));
    CHECK(store.param(i).extent(0) == p.numel);
    CHECK(store.param(i).data() == store.params().data() + p.offset);
    CHECK(store.grad(i).data() == store.grads().data() + p.offset);
    end = p.offset + p.numel;
    total += p.numel;
  }
  CHECK(store.buffer_size() >= end);
  CHECK(store.params().extent(0) == store.buffer_size());
  CHECK(store.grads().extent(0) == store.buffer_size());
  CHECK(store.num_elements() == static_cast<std::int64_t>(total));
  CHECK(*store.find("fc2.weight") == 2);
  CHECK_FALSE(store.find("fc3.weight").has_value());
  CHECK_THROWS_AS(store.index("fc3.weight"), trellis::Error);
  CHECK(store.param_matrix(0).extent(0) == 7);
  CHECK(store.param_matrix(0).extent(1) == 5);
  CHECK_THROWS_AS(store.param_matrix(1), trellis::Error);  // a vector, not a matrix
}

TEST_CASE("parameter init depends on name and seed, not registration order", "[nn][params]") {
  auto entries = model_entries();
  ParameterStore forward_order, reverse_order, other_seed;
  for (const auto& e : entries) forward_order.add(e.name, e.shape, e.init, e.decay);
  std::reverse(entries.begin(), entries.end());
  for (const auto& e : entries) reverse_order.add(e.name, e.shape, e.init, e.decay);
  for (const auto& e : entries) other_seed.add(e.name, e.shape, e.init, e.decay);
  forward_order.finalize(42);
  reverse_order.finalize(42);
  other_seed.finalize(43);
  CHECK(forward_order.info(0).offset !=
        reverse_order.info(*reverse_order.find("fc1.weight")).offset);
  const auto a = values_by_name(forward_order), b = values_by_name(reverse_order),
             c = values_by_name(other_seed);
  CHECK(a == b);
  CHECK(a.at("fc1.weight") != c.at("fc1.weight"));
  // Two parameters with the same init but different names differ.
  CHECK(a.at("fc1.weight") != std::vector<float>(a.at("fc1.weight").size(), 0.0f));
  CHECK(a.at("fc2.bias") == std::vector<float>(3, 0.125f));
  CHECK(a.at("ln.bias") == std::vector<float>(1, 0.0f));
  for (float v : a.at("fc1.bias")) {
    CHECK(v >= -0.5f);
    CHECK(v <= 0.25f);
  }
}

TEST_CASE("kaiming and xavier bounds are respected and reached", "[nn][params]") {
  ParameterStore store;
  const auto w = store.add("big.weight", {256, 100}, InitSpec::kaiming_uniform(100), true);
  const auto linear =
      store.add("lin.weight", {64, 49}, InitSpec::kaiming_uniform(49, 1.0 / std::sqrt(3.0)), true);
  const auto x = store.add("x.weight", {30, 50}, InitSpec::xavier_uniform(50, 30), true);
  store.finalize(3);
  struct Case {
    std::size_t index;
    double bound;
  };
  for (const Case& c : {Case{w, std::sqrt(2.0) * std::sqrt(3.0 / 100)}, Case{linear, 1.0 / 7.0},
                        Case{x, std::sqrt(6.0 / 80)}}) {
    CHECK(store.info(c.index).init.uniform_bound() == Approx(c.bound));
    const auto v = to_host(store.param(c.index));
    double max_abs = 0, sum = 0;
    for (float e : v) {
      max_abs = std::max(max_abs, double(std::fabs(e)));
      sum += e;
    }
    CHECK(max_abs <= static_cast<float>(c.bound));
    CHECK(max_abs > 0.95 * c.bound);
    CHECK(std::fabs(sum / v.size()) < 0.1 * c.bound);
  }
}

TEST_CASE("grads start at zero, zero_grads clears them, decay mask marks weights", "[nn][params]") {
  ParameterStore store;
  const auto w = store.add("fc.weight", {3, 3}, InitSpec::normal(1.0), true);
  const auto b = store.add("fc.bias", {3}, InitSpec::zeros(), false);
  store.finalize(9);
  for (float g : to_host(store.grads())) CHECK(g == 0.0f);
  kernels::fill(store.grad_vector(w), 2.0f);
  CHECK(to_host(store.grad(w)) == std::vector<float>(9, 2.0f));
  store.zero_grads();
  for (float g : to_host(store.grads())) CHECK(g == 0.0f);

  const auto mask = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.decay_mask());
  for (std::size_t i = 0; i < mask.extent(0); ++i) {
    const bool in_weight = i >= store.info(w).offset && i < store.info(w).offset + 9;
    INFO("element " << i);
    CHECK(mask[i] == (in_weight ? 1 : 0));
  }
  (void)b;
}

TEST_CASE("parameter store rejects misuse", "[nn][params]") {
  ParameterStore store;
  CHECK_THROWS_AS(store.params(), trellis::Error);  // before finalize
  store.add("a", {2}, InitSpec::zeros(), false);
  CHECK_THROWS_AS(store.add("a", {3}, InitSpec::zeros(), false), trellis::Error);
  CHECK_THROWS_AS(store.add("", {3}, InitSpec::zeros(), false), trellis::Error);
  CHECK_THROWS_AS(store.add("neg", {-1, 2}, InitSpec::zeros(), false), trellis::Error);
  CHECK_THROWS_AS(store.param(0), trellis::Error);
  store.finalize(0);
  CHECK_THROWS_AS(store.add("b", {1}, InitSpec::zeros(), false), trellis::Error);
  CHECK_THROWS_AS(store.finalize(0), trellis::Error);
  CHECK_THROWS_AS(store.info(5), trellis::Error);
}
