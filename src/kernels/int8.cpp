#include "trellis/kernels/int8.hpp"

#include "trellis/core/cpu_features.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/host_simd.hpp"
#include "trellis/core/kernel_label.hpp"
#include "trellis/kernels/activation.hpp"

#include "int8_impl.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace trellis::kernels {

namespace {

KOKKOS_INLINE_FUNCTION int clamp_int(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// round(v) to nearest, ties to even (the default rounding mode), as an int.
KOKKOS_INLINE_FUNCTION int round_even(float v) { return static_cast<int>(rintf(v)); }

// 1.5 * 2^23: adding and subtracting it rounds a float of magnitude below 2^22 to an integer,
// to nearest with ties to even (the default rounding mode), in two vectorisable additions
// (rintf is a libm call on baseline x86-64).
constexpr float kRoundToInteger = 12582912.0f;

// One value's level byte on the host: clamp in the float domain first, so the rounding trick
// and the conversion only see values in [qmin - z, qmax - z].
TRELLIS_HOST_INLINE std::uint8_t host_level(float v, float lo, float hi, int zero) {
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  v = (v + kRoundToInteger) - kRoundToInteger;
  return static_cast<std::uint8_t>(static_cast<int>(v) + zero);
}

// The host body of quantize() and, with an activation first, of activation_quantize(): one loop
// per activation, each vectorised.
TRELLIS_HOST_CLONES
void quantize_host(const float* __restrict x, std::int64_t n, Activation first, float inverse,
                   float lo, float hi, int zero, std::uint8_t* __restrict out) {
  if (first == Activation::gelu) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = host_level(gelu(x[i]) * inverse, lo, hi, zero);
  } else if (first == Activation::gelu_tanh) {
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = host_level(gelu_tanh(x[i]) * inverse, lo, hi, zero);
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = host_level(x[i] * inverse, lo, hi, zero);
  }
}

// out[e] = q(x[e]) or q(f(x[e])): both public kernels.
void quantize_values(ConstVector x, const ActivationQuant& q, ByteVector out, Activation first,
                     const char* who) {
  TRELLIS_REQUIRE(out.extent(0) >= x.extent(0), std::string(who) + ": " +
                                                    std::to_string(x.extent(0)) + " values into " +
                                                    std::to_string(out.extent(0)) + " bytes");
  TRELLIS_REQUIRE(q.scale > 0.0f, std::string(who) + ": scale must be positive");
  TRELLIS_REQUIRE(first != Activation::relu, std::string(who) + ": relu is not a quantized MLP's");
  const float inverse = 1.0f / q.scale;
  if constexpr (kHostKernels) {
    quantize_host(x.data(), static_cast<std::int64_t>(x.extent(0)), first, inverse,
                  static_cast<float>(q.qmin() - q.zero_point),
                  static_cast<float>(q.qmax() - q.zero_point), q.zero_point, out.data());
    return;
  }
  const ActivationQuant quant = q;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::int8::quantize"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const float v = first == Activation::gelu        ? gelu(x(e))
                        : first == Activation::gelu_tanh ? gelu_tanh(x(e))
                                                         : x(e);
        const int level =
            clamp_int(round_even(v * inverse) + quant.zero_point, quant.qmin(), quant.qmax());
        out(e) = static_cast<std::uint8_t>(level & 0xff);  // s8: the two's complement bits
      });
}

template <class From, class To>
void copy_into(const From& from, const To& to) {
  Kokkos::deep_copy(to, from);
}

}  // namespace

const char* quant_type_name(QuantType type) { return type == QuantType::u8 ? "u8" : "s8"; }

void quantize(ConstVector x, const ActivationQuant& q, ByteView out) {
  quantize_values(x, q, out, Activation::none, "quantize");
}

void activation_quantize(ConstVector z, Activation f, const ActivationQuant& q, ByteVector out) {
  quantize_values(z, q, out, f, "activation_quantize");
}

void dequantize(ConstByteVector q, const ActivationQuant& quant, Vector x) {
  require_same_shape(q, x, "dequantize");
  const ActivationQuant p = quant;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::int8::dequantize"), Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const int v = p.type == QuantType::u8 ? static_cast<int>(q(e))
                                              : static_cast<int>(static_cast<std::int8_t>(q(e)));
        x(e) = p.scale * static_cast<float>(v - p.zero_point);
      });
}

void quantize_weights(ConstVector w, std::size_t rows, std::size_t cols, Int8View q,
                      Vector scales) {
  TRELLIS_REQUIRE(
      w.extent(0) == rows * cols && q.extent(0) == rows * cols && scales.extent(0) == rows,
      "quantize_weights: w " + extents_string(w) + ", q " + extents_string(q) + ", scales " +
          extents_string(scales) + " for [" + std::to_string(rows) + ", " + std::to_string(cols) +
          "]");
  const auto c = static_cast<std::int64_t>(cols);
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::int8::quantize_weights"),
      Range(0, static_cast<std::int64_t>(rows)), KOKKOS_LAMBDA(const std::int64_t r) {
        float largest = 0.0f;
        for (std::int64_t k = 0; k < c; ++k) largest = fmaxf(largest, fabsf(w(r * c + k)));
        const float scale = largest > 0.0f ? largest / 127.0f : 1.0f;
        scales(r) = scale;
        for (std::int64_t k = 0; k < c; ++k)
          q(r * c + k) =
              static_cast<std::int8_t>(clamp_int(round_even(w(r * c + k) / scale), -127, 127));
      });
}

#if TRELLIS_INT8_ONEDNN
// One matmul primitive per batch size (a model meets two: the batch and a last partial one),
// created at first use with every constant fused in: output scales s * s_w[o], the input's
// zero point, the bias, the activation and the residual. The weights
// are read in place as the [in, out] matrix W^T (strides 1, in): no transposed copy.
struct Int8Linear::Onednn {
  struct Plan {
    dnnl::matmul primitive;
    dnnl::memory src, weights, bias, residual, dst;
  };
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<int, Plan> plans;

  Plan& plan(const Int8Linear& layer, int n) {
    auto it = plans.find(n);
    if (it != plans.end()) return it->second;
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    const dnnl::memory::dim m = n, k = layer.in_, o = layer.out_;
    const dt src_type = layer.input_.type == QuantType::u8 ? dt::u8 : dt::s8;
    const dnnl::memory::desc src_md({m, k}, src_type, dims{k, 1});
    const dnnl::memory::desc weights_md({k, o}, dt::s8, dims{1, k});
    const dnnl::memory::desc bias_md({1, o}, dt::f32, dims{o, 1});
    const dnnl::memory::desc residual_md({m, o}, dt::f32, dims{o, 1});
    const dnnl::memory::desc dst_md({m, o}, dt::f32, dims{o, 1});
    const auto scales = Kokkos::create_mirror_view_and_copy(HostSpace(), layer.scales_);
    int8_detail::Epilogue epilogue;
    epilogue.activation = layer.activation_;
    if (layer.residual_) epilogue.residual = &residual_md;
    const dnnl::primitive_attr attr =
        int8_detail::fused_attributes(std::vector<float>(scales.data(), scales.data() + layer.out_),
                                      layer.input_.zero_point, bias_md, epilogue);
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, weights_md, dst_md), attr,
                                            engine);
      Plan p;
      p.primitive = dnnl::matmul(pd);
      p.src = dnnl::memory(src_md, engine, DNNL_MEMORY_NONE);
      p.weights = dnnl::memory(weights_md, engine, layer.weights_.data());
      p.bias = dnnl::memory(bias_md, engine, layer.bias_.data());
      p.residual = dnnl::memory(residual_md, engine, DNNL_MEMORY_NONE);
      p.dst = dnnl::memory(dst_md, engine, DNNL_MEMORY_NONE);
      return plans.emplace(n, std::move(p)).first->second;
    } catch (const dnnl::error& e) {
      throw Error("oneDNN has no " + std::string(quant_type_name(layer.input_.type)) +
                  " x s8 matmul for layer " + layer.name_ + " [" + std::to_string(n) + ", " +
                  std::to_string(k) + "] x [" + std::to_string(k) + ", " + std::to_string(o) +
                  "]: " + e.what());
    }
  }

  void execute(const Int8Linear& layer, int n, const std::uint8_t* xq, float* y,
               const float* residual) {
    Plan& p = plan(layer, n);
    p.src.set_data_handle(const_cast<std::uint8_t*>(xq));  // oneDNN: not const-correct
    p.dst.set_data_handle(y);
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, p.src.get()},
                               {DNNL_ARG_WEIGHTS, p.weights.get()},
                               {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, p.bias.get()},
                               {DNNL_ARG_DST, p.dst.get()},
                               {0, nullptr}};
    int count = 4;
    if (residual != nullptr) {
      p.residual.set_data_handle(const_cast<float*>(residual));
      // The residual's post-op index: after the bias and the activation, if any.
      const int index = layer.activation_ != Activation::none ? 2 : 1;
      args[count++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, p.residual.get()};
    }
    const dnnl_status_t status =
        dnnl_primitive_execute(p.primitive.get(), stream.get(), count, args);
    if (status != dnnl_success)
      throw Error("oneDNN int8 matmul of layer " + layer.name_ + " failed with status " +
                  std::to_string(static_cast<int>(status)));
  }
};

bool int8_onednn_available() {
  static const bool available = [] {
    // oneDNN creates int8 primitives on any AVX2 CPU, but without VNNI (or AMX) its kernels
    // sum u8 x s8 pairs in saturating int16 (VPMADDUBSW): off by up to a third on full-
    // range operands on an AMD Zen 3. The reference kernel is exact there.
    const CpuFeatures& cpu = host_cpu_features();
    if (!(cpu.avx512_vnni || cpu.avx_vnni || cpu.amx_int8)) return false;
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      using dt = dnnl::memory::data_type;
      const dnnl::memory::desc a({1, 1}, dt::u8, dnnl::memory::dims{1, 1});
      const dnnl::memory::desc b({1, 1}, dt::s8, dnnl::memory::dims{1, 1});
      const dnnl::memory::desc c({1, 1}, dt::f32, dnnl::memory::dims{1, 1});
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}
#else
struct Int8Linear::Onednn {};
bool int8_onednn_available() { return false; }
#endif

Int8Linear::Int8Linear(const std::string& name, int in, int out, ConstInt8Vector weights,
                       ConstVector weight_scales, ConstVector bias, const ActivationQuant& input,
                       Activation f, Int8Backend backend)
    : name_(name),
      in_(in),
      out_(out),
      weights_("trellis::int8::" + name + ".weights", static_cast<std::size_t>(in) * out),
      scales_("trellis::int8::" + name + ".scales", static_cast<std::size_t>(out)),
      bias_("trellis::int8::" + name + ".bias", static_cast<std::size_t>(out)),
      input_(input),
      activation_(f) {
  TRELLIS_REQUIRE(weights.extent(0) == weights_.extent(0) &&
                      weight_scales.extent(0) == scales_.extent(0) &&
                      bias.extent(0) == bias_.extent(0),
                  "int8 linear " + name + ": weights " + extents_string(weights) + ", scales " +
                      extents_string(weight_scales) + ", bias " + extents_string(bias) + " for [" +
                      std::to_string(out) + ", " + std::to_string(in) + "]");
  copy_into(weights, weights_);
  copy_into(bias, bias_);
  int8_detail::output_scales(input.scale, weight_scales, scales_);
  if (int8_detail::use_onednn(backend, "int8 linear " + name)) onednn_ = std::make_unique<Onednn>();
}

Int8Linear::~Int8Linear() = default;

// On every build alike, though only oneDNN's primitives (made at the first forward) depend on
// it: a model that changes an epilogue late would run differently with and without oneDNN.
void Int8Linear::require_unplanned(const char* what) const {
  if (ran_) throw Error("int8 linear " + name_ + ": " + what + " is set before the first forward");
}

void Int8Linear::set_residual(bool residual) {
  require_unplanned("the residual");
  residual_ = residual;
}

void Int8Linear::set_activation(Activation f) {
  require_unplanned("the activation");
  activation_ = f;
}

void Int8Linear::forward(ConstByteVector xq, int n, Matrix y, ConstMatrix residual) {
  TRELLIS_REQUIRE(xq.extent(0) >= static_cast<std::size_t>(n) * in_ &&
                      y.extent(0) == static_cast<std::size_t>(n) &&
                      y.extent(1) == static_cast<std::size_t>(out_),
                  "int8 linear " + name_ + ": input " + extents_string(xq) + " output " +
                      extents_string(y) + " for n = " + std::to_string(n));
  TRELLIS_REQUIRE(
      residual_ == (residual.data() != nullptr),
      "int8 linear " + name_ +
          (residual_ ? ": a residual is required" : ": it was given a residual it has not"));
  TRELLIS_REQUIRE(!residual_ || (residual.extent(0) == static_cast<std::size_t>(n) &&
                                 residual.extent(1) == static_cast<std::size_t>(out_)),
                  "int8 linear " + name_ + ": residual " + extents_string(residual) +
                      " for n = " + std::to_string(n));
  if (n == 0) return;
  ran_ = true;
#if TRELLIS_INT8_ONEDNN
  if (onednn_) {
    onednn_->execute(*this, n, xq.data(), y.data(), residual.data());
    return;
  }
#endif
  forward_reference(xq, n, y, residual);
}

void Int8Linear::forward_reference(ConstByteVector xq, int n, Matrix y,
                                   ConstMatrix residual) const {
  const ConstInt8Vector w = weights_;
  const ConstVector scales = scales_, bias = bias_;
  const std::int64_t in = in_, out = out_;
  const bool is_unsigned = input_.type == QuantType::u8;
  const int zero = input_.zero_point;
  const Activation f = activation_;
  const float* r = residual.data();
  // One (row, output) pair per iteration; the k loop is contiguous in both operands.
  using Tiles = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::int8::linear_reference"),
      Tiles({0, 0}, {static_cast<std::int64_t>(n), out}),
      KOKKOS_LAMBDA(const std::int64_t i, const std::int64_t o) {
        std::int32_t sum = 0;
        for (std::int64_t k = 0; k < in; ++k) {
          const std::uint8_t byte = xq(i * in + k);
          const int x = is_unsigned ? static_cast<int>(byte)
                                    : static_cast<int>(static_cast<std::int8_t>(byte));
          sum += (x - zero) * static_cast<int>(w(o * in + k));
        }
        const float v = int8_detail::apply(f, static_cast<float>(sum) * scales(o) + bias(o));
        y(i, o) = r != nullptr ? v + r[i * out + o] : v;
      });
}

}  // namespace trellis::kernels
