// Agreement with PyTorch: tools/torch_ref_gpt.py builds nanoGPT-style LayerNorm, attention,
// Block and a tiny GPT with fixed parameters and writes their outputs and gradients (computed
// in float64) to tests/reference/gpt_reference.h5. Trellis loads the same parameters by name,
// runs forward and backward in float32 and must agree within rel 1e-4 / abs 1e-5.
#include "catch.hpp"
#include "unit/support/nn_helpers.hpp"

#include "trellis/data/hdf5.hpp"
#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/attention.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/nn/layernorm.hpp"
#include "trellis/nn/transformer.hpp"

#include <string>
#include <vector>

using namespace trellis;
using trellis::kernels::first_rows;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr double kRel = 1e-4, kAbs = 1e-5;

std::string reference_path() {
  const std::string here = __FILE__;
  return here.substr(0, here.rfind("/tests/")) + "/tests/reference/gpt_reference.h5";
}

class Reference {
 public:
  Reference() {
    hdf5_quiet();
    file_ = H5File(TRELLIS_H5(H5Fopen(reference_path().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  }

  template <class T>
  std::vector<T> read(const std::string& path, hid_t mem_type) const {
    H5Dataset d(TRELLIS_H5(H5Dopen2(file_.get(), path.c_str(), H5P_DEFAULT)));
    H5Space s(TRELLIS_H5(H5Dget_space(d.get())));
    const hssize_t n = TRELLIS_H5(H5Sget_simple_extent_npoints(s.get()));
    std::vector<T> v(static_cast<std::size_t>(n));
    TRELLIS_H5(H5Dread(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
    return v;
  }
  std::vector<double> doubles(const std::string& path) const {
    return read<double>(path, H5T_NATIVE_DOUBLE);
  }
  std::vector<float> floats(const std::string& path) const {
    return read<float>(path, H5T_NATIVE_FLOAT);
  }
  std::vector<std::int32_t> ints(const std::string& path) const {
    return read<std::int32_t>(path, H5T_NATIVE_INT32);
  }
  hsize_t links(const std::string& group) const {
    H5Group g(TRELLIS_H5(H5Gopen2(file_.get(), group.c_str(), H5P_DEFAULT)));
    H5G_info_t info;
    TRELLIS_H5(H5Gget_info(g.get(), &info));
    return info.nlinks;
  }

  // Copies every parameter of `store` from <group>/params/<name>; the file must hold exactly
  // the store's parameters.
  void load_parameters(const std::string& group, nn::ParameterStore& store) const {
    REQUIRE(links(group + "/params") == store.size());
    for (std::size_t i = 0; i < store.size(); ++i) {
      const auto values = floats(group + "/params/" + store.info(i).name);
      REQUIRE(values.size() == store.info(i).numel);
      Kokkos::View<const float*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(
          values.data(), values.size());
      Kokkos::deep_copy(store.param(i), h);
    }
  }

  // Compares every parameter gradient with <group>/grads/<name>.
  void check_gradients(const std::string& group, const nn::ParameterStore& store) const {
    for (std::size_t i = 0; i < store.size(); ++i) {
      compare(store.info(i).name, to_host(store.grad(i)),
              doubles(group + "/grads/" + store.info(i).name));
    }
  }

  static void compare(const std::string& what, const std::vector<float>& got,
                      const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!test::close(got[i], want[i], kRel, kAbs) && bad++ < 5) {
        FAIL_CHECK(what << "[" << i << "]: trellis " << got[i] << ", pytorch " << want[i]);
      }
    }
    INFO(what << ": " << bad << " of " << got.size() << " elements differ");
    CHECK(bad == 0);
  }

 private:
  H5File file_;
};

// Forward/backward of one layer on the case's x and dy; compares y, dx and every gradient.
void check_layer(const Reference& ref, const std::string& group, nn::Layer& layer,
                 nn::ParameterStore& store) {
  store.finalize(1);
  ref.load_parameters(group, store);
  const auto x_host = ref.floats(group + "/x");
  const auto dy_host = ref.floats(group + "/dy");
  const int d = layer.in_features();
  const int rows = static_cast<int>(x_host.size()) / d;
  FloatView x = to_device("x", x_host), dy = to_device("dy", dy_host);
  layer.forward(as_matrix(x, rows, d), rows, nn::StepContext{1, 0, 0, true});
  Reference::compare(group + " y", to_host(first_rows(layer.output(), rows)),
                     ref.doubles(group + "/y"));
  store.zero_grads();
  layer.backward(as_matrix(dy, rows, d), rows);
  Reference::compare(group + " dx", to_host(first_rows(layer.input_grad(), rows)),
                     ref.doubles(group + "/dx"));
  ref.check_gradients(group, store);
}

}  // namespace

TEST_CASE("LayerNorm agrees with PyTorch", "[gpt][reference]") {
  Reference ref;
  nn::ParameterStore store;
  nn::LayerNorm ln(store, "ln", 8, 6);
  check_layer(ref, "layernorm", ln, store);
}

TEST_CASE("CausalSelfAttention agrees with PyTorch (nanoGPT)", "[gpt][reference]") {
  Reference ref;
  nn::ParameterStore store;
  nn::CausalSelfAttention attn(store, "attn", 8, 2, 5, 10, /*dropout=*/0.0f);
  check_layer(ref, "attention", attn, store);
}

TEST_CASE("transformer Block agrees with PyTorch (nanoGPT)", "[gpt][reference]") {
  Reference ref;
  nn::ParameterStore store;
  nn::Block block(store, "blk", 8, 2, 5, 10, /*dropout=*/0.0f);
  check_layer(ref, "block", block, store);
}

TEST_CASE("tiny Gpt agrees with PyTorch: logits, mean cross-entropy, all gradients",
          "[gpt][reference]") {
  Reference ref;
  const auto n = static_cast<int>(ref.ints("gpt/tokens").size()) / 5;
  nn::GptSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.d_model = 8;
  spec.seq_len = 5;
  spec.vocab = 11;
  spec.capacity = n;
  nn::ParameterStore store;
  nn::Gpt gpt(spec, store);
  store.finalize(1);
  ref.load_parameters("gpt", store);
  IntView tokens = test::labels_to_device(ref.ints("gpt/tokens"));
  IntView targets = test::labels_to_device(ref.ints("gpt/targets"));
  const int rows = n * spec.seq_len;

  const ConstMatrix logits = gpt.forward(tokens, n, nn::StepContext{1, 0, 0, true});
  Reference::compare("logits", to_host(logits), ref.doubles("gpt/logits"));
  const double loss = kernels::softmax_xent_forward(logits, targets).loss_sum / rows;
  CHECK(test::close(loss, ref.doubles("gpt/loss").at(0), kRel, kAbs));

  FloatView dlogits("dlogits", static_cast<std::size_t>(rows * spec.vocab));
  kernels::softmax_xent_backward(logits, targets, 1.0f / static_cast<float>(rows),
                                 as_matrix(dlogits, rows, spec.vocab));
  store.zero_grads();
  gpt.backward(as_matrix(dlogits, rows, spec.vocab), n);
  ref.check_gradients("gpt", store);
}
