// Agreement with PyTorch: tools/torch_ref_cnn.py writes tests/reference/cnn_reference.h5 (inputs,
// parameters, running stats, outputs, input and parameter gradients for a fixed upstream
// gradient, computed in float64); each case here loads the same parameters into the Trellis
// layer, runs forward and backward in float32 and compares within 1e-4 relative / 1e-5 absolute.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/data/hdf5.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/batchnorm.hpp"
#include "trellis/nn/cnn.hpp"
#include "trellis/nn/conv2d.hpp"
#include "trellis/nn/pool.hpp"
#include "trellis/nn/residual.hpp"

#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr double kRel = 1e-4, kAbs = 1e-5;

// $TRELLIS_SRC/tests/reference/cnn_reference.h5 when the environment names the source tree,
// else the path next to this file (the test runs in-tree).
std::string reference_path() {
  const char* src = std::getenv("TRELLIS_SRC");
  if (src != nullptr && *src != '\0') return std::string(src) + "/tests/reference/cnn_reference.h5";
  const std::string here = __FILE__;
  return here.substr(0, here.rfind("/tests/")) + "/tests/reference/cnn_reference.h5";
}

class Reference {
 public:
  Reference() {
    hdf5_quiet();
    const std::string path = reference_path();
    INFO("reference file " << path << " (regenerate: /usr/bin/python3 tools/torch_ref_cnn.py)");
    REQUIRE_NOTHROW(file_ = H5File(TRELLIS_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT))));
  }

  bool has(const std::string& path) const {
    return H5Lexists(file_.get(), path.c_str(), H5P_DEFAULT) > 0;
  }
  std::size_t count(const std::string& path) const {
    H5Group g(TRELLIS_H5(H5Gopen2(file_.get(), path.c_str(), H5P_DEFAULT)));
    H5G_info_t info;
    TRELLIS_H5(H5Gget_info(g.get(), &info));
    return static_cast<std::size_t>(info.nlinks);
  }
  template <class T>
  std::vector<T> read(const std::string& path, hid_t type) const {
    INFO("dataset " << path);
    REQUIRE(has(path));
    H5Dataset d(TRELLIS_H5(H5Dopen2(file_.get(), path.c_str(), H5P_DEFAULT)));
    H5Space space(TRELLIS_H5(H5Dget_space(d.get())));
    std::vector<T> values(
        static_cast<std::size_t>(TRELLIS_H5(H5Sget_simple_extent_npoints(space.get()))));
    TRELLIS_H5(H5Dread(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
    return values;
  }
  std::vector<float> floats(const std::string& path) const {
    return read<float>(path, H5T_NATIVE_FLOAT);
  }
  std::vector<double> doubles(const std::string& path) const {
    return read<double>(path, H5T_NATIVE_DOUBLE);
  }
  std::vector<std::int32_t> ints(const std::string& path) const {
    return read<std::int32_t>(path, H5T_NATIVE_INT32);
  }
  std::vector<int> attr_ints(const std::string& group, const char* name) const {
    INFO("attribute " << group << "/" << name);
    H5Attribute a(
        TRELLIS_H5(H5Aopen_by_name(file_.get(), group.c_str(), name, H5P_DEFAULT, H5P_DEFAULT)));
    H5Space space(TRELLIS_H5(H5Aget_space(a.get())));
    std::vector<int> values(
        static_cast<std::size_t>(TRELLIS_H5(H5Sget_simple_extent_npoints(space.get()))));
    TRELLIS_H5(H5Aread(a.get(), H5T_NATIVE_INT, values.data()));
    return values;
  }
  int attr(const std::string& group, const char* name) const {
    const std::vector<int> values = attr_ints(group, name);
    REQUIRE(values.size() == 1);
    return values[0];
  }

 private:
  H5File file_;
};

template <class View>
void compare(const std::string& what, const View& actual_view,
             const std::vector<double>& expected) {
  const std::vector<float> actual = to_host(actual_view);
  REQUIRE(actual.size() == expected.size());
  int bad = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (test::close(actual[i], expected[i], kRel, kAbs)) continue;
    if (++bad <= 5) {
      INFO(what << "[" << i << "]: trellis " << actual[i] << ", pytorch " << expected[i]);
      CHECK(test::close(actual[i], expected[i], kRel, kAbs));
    }
  }
  INFO(what << ": " << bad << " of " << actual.size() << " elements differ");
  CHECK(bad == 0);
}

using NamedVectors = std::vector<std::pair<std::string, kernels::Vector>>;

// One case: loads params/<name> (name = Trellis name without `prefix`) and buffers_in/, runs
// forward(x) and backward(dy), compares y, dx, grads/ and buffers/.
void check_case(const Reference& ref, const std::string& name, nn::ParameterStore& store,
                const std::string& prefix, const NamedVectors& buffers,
                const std::function<ConstMatrix(ConstMatrix, int)>& forward,
                const std::function<ConstMatrix(ConstMatrix, int)>& backward) {
  INFO("case " << name);
  const int n = ref.attr(name, "n");
  const bool has_params = ref.has(name + "/params");
  REQUIRE(store.size() == (has_params ? ref.count(name + "/params") : 0));
  for (std::size_t i = 0; i < store.size(); ++i) {
    const std::string torch_name = store.info(i).name.substr(prefix.size());
    const std::vector<float> v = ref.floats(name + "/params/" + torch_name);
    REQUIRE(v.size() == store.info(i).numel);
    Kokkos::deep_copy(store.param(i), to_device("p", v));
  }
  REQUIRE(buffers.size() == (ref.has(name + "/buffers") ? ref.count(name + "/buffers") : 0));
  for (const auto& [buffer_name, view] : buffers) {
    const std::vector<float> v =
        ref.floats(name + "/buffers_in/" + buffer_name.substr(prefix.size()));
    REQUIRE(v.size() == view.extent(0));
    Kokkos::deep_copy(view, to_device("b", v));
  }
  store.zero_grads();

  const std::vector<float> x_host = ref.floats(name + "/x");
  const std::vector<float> dy_host = ref.floats(name + "/dy");
  FloatView x = to_device("x", x_host), dy = to_device("dy", dy_host);
  const int in = static_cast<int>(x_host.size()) / n, out = static_cast<int>(dy_host.size()) / n;
  compare(name + "/y", forward(as_matrix(x, n, in), n), ref.doubles(name + "/y"));
  compare(name + "/dx", backward(as_matrix(dy, n, out), n), ref.doubles(name + "/dx"));
  for (std::size_t i = 0; i < store.size(); ++i) {
    const std::string torch_name = store.info(i).name.substr(prefix.size());
    compare(name + "/grads/" + torch_name, store.grad(i),
            ref.doubles(name + "/grads/" + torch_name));
  }
  for (const auto& [buffer_name, view] : buffers) {
    const std::string torch_name = buffer_name.substr(prefix.size());
    compare(name + "/buffers/" + torch_name, view, ref.doubles(name + "/buffers/" + torch_name));
  }
}

void check_layer(const Reference& ref, const std::string& name, nn::Layer& layer,
                 nn::ParameterStore& store, const std::string& prefix = "",
                 const NamedVectors& buffers = {}) {
  nn::StepContext ctx;  // training
  check_case(
      ref, name, store, prefix, buffers,
      [&](ConstMatrix x, int n) {
        layer.forward(x, n, ctx);
        return first_rows(layer.output(), n);
      },
      [&](ConstMatrix dy, int n) {
        layer.backward(dy, n);
        return first_rows(layer.input_grad(), n);
      });
}

NamedVectors running_stats(const nn::BatchNorm2d& bn) {
  return {{bn.name() + ".running_mean", bn.running_mean()},
          {bn.name() + ".running_var", bn.running_var()}};
}

}  // namespace

TEST_CASE("Conv2d agrees with PyTorch", "[cnn][torch]") {
  const Reference ref;
  for (const std::string name : {"conv", "conv_s1p0"}) {
    nn::ParameterStore store;
    nn::Conv2d conv(store, "conv", ref.attr(name, "channels"), ref.attr(name, "out_channels"),
                    ref.attr(name, "kernel"), ref.attr(name, "stride"), ref.attr(name, "padding"),
                    ref.attr(name, "height"), ref.attr(name, "width"), /*capacity=*/4, true);
    store.finalize(1);
    check_layer(ref, name, conv, store);
  }
}

TEST_CASE("MaxPool2d agrees with PyTorch, ties to the first maximum", "[cnn][torch]") {
  const Reference ref;
  for (const std::string name : {"maxpool", "maxpool_overlap"}) {
    nn::ParameterStore store;
    store.finalize(1);
    nn::MaxPool2d pool("pool", ref.attr(name, "channels"), ref.attr(name, "height"),
                       ref.attr(name, "width"), ref.attr(name, "kernel"), ref.attr(name, "stride"),
                       /*capacity=*/2);
    check_layer(ref, name, pool, store);
    const std::vector<std::int32_t> expected = ref.ints(name + "/argmax");
    std::vector<std::int32_t> actual(expected.size());
    Kokkos::deep_copy(
        Kokkos::View<std::int32_t*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
            actual.data(), actual.size()),
        Kokkos::subview(pool.argmax(), Kokkos::make_pair(std::size_t{0}, actual.size())));
    CHECK(actual == expected);
  }
}

TEST_CASE("BatchNorm2d agrees with PyTorch in training and eval mode", "[cnn][torch]") {
  const Reference ref;
  const std::string name = "batchnorm";
  const int c = ref.attr(name, "channels"), h = ref.attr(name, "height"),
            w = ref.attr(name, "width");
  nn::ParameterStore store;
  nn::BatchNorm2d bn(store, "bn", c, h, w, /*capacity=*/4);
  store.finalize(1);
  check_layer(ref, name, bn, store, "", running_stats(bn));
  CHECK(bn.batch_count() == 4.0 * h * w);

  // Eval mode with the running statistics the training pass left behind.
  nn::StepContext eval;
  eval.training = false;
  FloatView x = to_device("x", ref.floats(name + "/eval_x"));
  FloatView dy = to_device("dy", ref.floats(name + "/eval_dy"));
  bn.forward(as_matrix(x, 3, c * h * w), 3, eval);
  compare("batchnorm/eval_y", first_rows(bn.output(), 3), ref.doubles(name + "/eval_y"));
  bn.backward(as_matrix(dy, 3, c * h * w), 3);
  compare("batchnorm/eval_dx", first_rows(bn.input_grad(), 3), ref.doubles(name + "/eval_dx"));
}

TEST_CASE("BasicBlock agrees with PyTorch (identity and projection shortcut)", "[cnn][torch]") {
  const Reference ref;
  for (const std::string name : {"block_identity", "block_projection"}) {
    nn::ParameterStore store;
    nn::BasicBlock block(store, "block", ref.attr(name, "channels"), ref.attr(name, "out_channels"),
                         ref.attr(name, "stride"), ref.attr(name, "height"),
                         ref.attr(name, "width"),
                         /*capacity=*/3);
    store.finalize(1);
    CHECK(block.has_projection() == (name == "block_projection"));
    NamedVectors buffers;
    for (const nn::BatchNorm2d* bn : block.batchnorms()) {
      for (auto& b : running_stats(*bn)) buffers.push_back(b);
    }
    check_layer(ref, name, block, store, "block.", buffers);
  }
}

TEST_CASE("Cnn agrees with PyTorch end to end", "[cnn][torch]") {
  const Reference ref;
  const std::string name = "cnn";
  nn::CnnSpec spec;
  spec.channels = ref.attr(name, "channels");
  spec.height = ref.attr(name, "height");
  spec.width = ref.attr(name, "width");
  spec.classes = ref.attr(name, "classes");
  spec.widths = ref.attr_ints(name, "widths");
  spec.blocks_per_stage = ref.attr(name, "blocks");
  spec.capacity = 4;
  spec.input_grad = true;
  nn::ParameterStore store;
  nn::Cnn model(spec, store);
  store.finalize(1);
  NamedVectors buffers;
  for (const nn::NamedBuffer& b : model.buffers()) buffers.emplace_back(b.name, b.data);
  nn::StepContext ctx;
  check_case(
      ref, name, store, "", buffers, [&](ConstMatrix x, int n) { return model.forward(x, n, ctx); },
      [&](ConstMatrix dy, int n) {
        model.backward(dy, n);
        return first_rows(model.input_grad(), n);
      });
}
