#include "trellis/kernels/int8_conv.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/kernel_label.hpp"

#include "int8_impl.hpp"

#include <map>
#include <vector>

namespace trellis::kernels {

#if TRELLIS_INT8_ONEDNN
struct Int8Conv2d::Onednn {
  struct Plan {
    dnnl::reorder quantize;  // f32 NCHW -> the convolution's u8/s8 layout
    dnnl::convolution_forward conv;
    dnnl::reorder unpack;  // the convolution's f32 layout -> NCHW (may be absent)
    bool needs_unpack = false;
    dnnl::memory x_user, x_q, weights, bias, y_conv, y_user;
  };
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<int, Plan> plans;

  static void run(const dnnl::primitive& p, const dnnl::stream& s,
                  std::vector<dnnl_exec_arg_t> args, const std::string& what) {
    const dnnl_status_t status =
        dnnl_primitive_execute(p.get(), s.get(), static_cast<int>(args.size()), args.data());
    if (status != dnnl_success)
      throw Error("oneDNN " + what + " failed with status " +
                  std::to_string(static_cast<int>(status)));
  }

  Plan& plan(const Int8Conv2d& layer, int n) {
    auto it = plans.find(n);
    if (it != plans.end()) return it->second;
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const ConvGeometry& g = layer.geometry_;
    const dnnl::memory::dim c = g.channels, h = g.height, w = g.width, k = g.kernel;
    const dnnl::memory::dim oc = layer.out_channels_, oh = g.out_height(), ow = g.out_width();
    const dt qtype = layer.input_.type == QuantType::u8 ? dt::u8 : dt::s8;
    const dnnl::memory::desc x_any({n, c, h, w}, qtype, tag::any);
    const dnnl::memory::desc w_any({oc, c, k, k}, dt::s8, tag::any);
    const dnnl::memory::desc y_any({n, oc, oh, ow}, dt::f32, tag::any);
    const dnnl::memory::desc bias_md({1, oc, 1, 1}, dt::f32, tag::nchw);
    const auto scales = Kokkos::create_mirror_view_and_copy(HostSpace(), layer.scales_);
    const dnnl::primitive_attr attr = int8_detail::fused_attributes(
        std::vector<float>(scales.data(), scales.data() + oc), layer.input_.zero_point, bias_md,
        int8_detail::Epilogue{layer.accumulate_, layer.activation_});
    try {
      const dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(
              dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_any, w_any,
              y_any, {g.stride, g.stride}, {g.padding, g.padding}, {g.padding, g.padding}),
          attr, engine);
      Plan p;
      p.conv = dnnl::convolution_forward(pd);
      // Weights: packed once from the OIHW bytes.
      dnnl::memory w_user({{oc, c, k, k}, dt::s8, tag::oihw}, engine,
                          const_cast<std::int8_t*>(layer.weights_.data()));
      p.weights = dnnl::memory(pd.weights_desc(), engine);
      dnnl::reorder(w_user, p.weights).execute(stream, w_user, p.weights);
      stream.wait();
      // Input: quantized and laid out by one reorder (dst = saturate(round(x / s_x) + z)).
      p.x_user = dnnl::memory({{n, c, h, w}, dt::f32, layer.input_nhwc_ ? tag::nhwc : tag::nchw},
                              engine, DNNL_MEMORY_NONE);
      p.x_q = dnnl::memory(pd.src_desc(), engine);
      dnnl::primitive_attr quantize;
      quantize.set_output_scales(0, {1.0f / layer.input_.scale});
      if (layer.input_.zero_point != 0)
        quantize.set_zero_points(DNNL_ARG_DST, 0, {layer.input_.zero_point});
      p.quantize = dnnl::reorder(dnnl::reorder::primitive_desc(p.x_user, p.x_q, quantize));
      p.bias = dnnl::memory(bias_md, engine, const_cast<float*>(layer.bias_.data()));
      p.y_user =
          dnnl::memory({{n, oc, oh, ow}, dt::f32, layer.output_nhwc_ ? tag::nhwc : tag::nchw},
                       engine, DNNL_MEMORY_NONE);
      p.needs_unpack = pd.dst_desc() != p.y_user.get_desc();
      if (p.needs_unpack && layer.accumulate_)
        throw Error("int8 convolution " + layer.name_ +
                    ": accumulating needs the output in the convolution's own layout");
      if (p.needs_unpack) {
        p.y_conv = dnnl::memory(pd.dst_desc(), engine);
        p.unpack = dnnl::reorder(p.y_conv, p.y_user);
      }
      return plans.emplace(n, std::move(p)).first->second;
    } catch (const dnnl::error& e) {
      throw Error("oneDNN has no int8 convolution for layer " + layer.name_ + " (" + g.describe() +
                  ", " + std::to_string(oc) + " channels, batch " + std::to_string(n) +
                  "): " + e.what());
    }
  }
};
#else
struct Int8Conv2d::Onednn {};
#endif

Int8Conv2d::Int8Conv2d(const std::string& name, const ConvGeometry& geometry, int out_channels,
                       ConstInt8Vector weights, ConstVector weight_scales, ConstVector bias,
                       const ActivationQuant& input, Activation f, int capacity,
                       Int8Backend backend)
    : name_(name),
      geometry_(geometry),
      out_channels_(out_channels),
      capacity_(capacity),
      weights_(
          "trellis::int8::" + name + ".weights",
          static_cast<std::size_t>(out_channels) * static_cast<std::size_t>(geometry.col_rows())),
      scales_("trellis::int8::" + name + ".scales", static_cast<std::size_t>(out_channels)),
      bias_("trellis::int8::" + name + ".bias", static_cast<std::size_t>(out_channels)),
      input_(input),
      activation_(f) {
  geometry.validate("int8 convolution " + name);
  TRELLIS_REQUIRE(
      weights.extent(0) == weights_.extent(0) && weight_scales.extent(0) == scales_.extent(0) &&
          bias.extent(0) == bias_.extent(0),
      "int8 convolution " + name + ": weights " + extents_string(weights) + ", scales " +
          extents_string(weight_scales) + ", bias " + extents_string(bias) + " for " +
          std::to_string(out_channels) + " channels of " + geometry.describe());
  Kokkos::deep_copy(weights_, weights);
  Kokkos::deep_copy(bias_, bias);
  int8_detail::output_scales(input.scale, weight_scales, scales_);
  if (int8_detail::use_onednn(backend, "int8 convolution " + name))
    onednn_ = std::make_unique<Onednn>();
  else
    xq_ = ByteView(
        "trellis::int8::" + name + ".xq",
        static_cast<std::size_t>(capacity) * static_cast<std::size_t>(geometry.image_size()));
}

Int8Conv2d::~Int8Conv2d() = default;

// On every build alike, though only oneDNN's primitives (made at the first forward) depend on
// it: a model that changes an epilogue late would run differently with and without oneDNN.
void Int8Conv2d::require_unplanned(const char* what) const {
  if (ran_)
    throw Error("int8 convolution " + name_ + ": " + what +
                " must be set before the first forward");
}

void Int8Conv2d::set_activation(Activation f) {
  require_unplanned("the activation");
  activation_ = f;
}

void Int8Conv2d::set_accumulate(bool accumulate) {
  require_unplanned("accumulation");
  accumulate_ = accumulate;
}

void Int8Conv2d::set_channels_last(bool input, bool output) {
  require_unplanned("the layouts");
  input_nhwc_ = input;
  output_nhwc_ = output;
}

void Int8Conv2d::forward(ConstMatrix x, int n, Matrix y) {
  const auto out_features =
      static_cast<std::size_t>(out_channels_) * static_cast<std::size_t>(geometry_.col_cols());
  TRELLIS_REQUIRE(n >= 0 && n <= capacity_ && x.extent(0) >= static_cast<std::size_t>(n) &&
                      x.extent(1) == static_cast<std::size_t>(geometry_.image_size()) &&
                      y.extent(0) == static_cast<std::size_t>(n) && y.extent(1) == out_features,
                  "int8 convolution " + name_ + ": input " + extents_string(x) + ", output " +
                      extents_string(y) + " for n = " + std::to_string(n));
  if (n == 0) return;
  ran_ = true;
#if TRELLIS_INT8_ONEDNN
  if (onednn_) {
    Onednn::Plan& p = onednn_->plan(*this, n);
    p.x_user.set_data_handle(const_cast<float*>(x.data()));  // oneDNN: not const-correct
    p.y_user.set_data_handle(y.data());
    Onednn::run(p.quantize, onednn_->stream,
                {{DNNL_ARG_FROM, p.x_user.get()}, {DNNL_ARG_TO, p.x_q.get()}},
                "int8 quantize of " + name_);
    const dnnl::memory& out = p.needs_unpack ? p.y_conv : p.y_user;
    Onednn::run(p.conv, onednn_->stream,
                {{DNNL_ARG_SRC, p.x_q.get()},
                 {DNNL_ARG_WEIGHTS, p.weights.get()},
                 {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, p.bias.get()},
                 {DNNL_ARG_DST, out.get()}},
                "int8 convolution " + name_);
    if (p.needs_unpack)
      Onednn::run(p.unpack, onednn_->stream,
                  {{DNNL_ARG_FROM, p.y_conv.get()}, {DNNL_ARG_TO, p.y_user.get()}},
                  "reorder of " + name_ + "'s output");
    return;
  }
#endif
  forward_reference(x, n, y);
}

void Int8Conv2d::forward_reference(ConstMatrix x, int n, Matrix y) {
  const std::size_t image = static_cast<std::size_t>(geometry_.image_size());
  quantize(ConstVector(x.data(), static_cast<std::size_t>(n) * image), input_, xq_);
  const ConstByteVector xq = xq_;
  const ConstInt8Vector w = weights_;
  const ConstVector scales = scales_, bias = bias_;
  const ConvGeometry g = geometry_;
  const int oh_count = g.out_height(), ow_count = g.out_width();
  const bool is_unsigned = input_.type == QuantType::u8;
  const int zero = input_.zero_point;
  const Activation f = activation_;
  const bool in_nhwc = input_nhwc_, out_nhwc = output_nhwc_, accumulate = accumulate_;
  const std::int64_t oc = out_channels_;
  using Tiles = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<4>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(
      TRELLIS_KERNEL_LABEL("trellis::int8::conv_reference"),
      Tiles({0, 0, 0, 0}, {n, out_channels_, oh_count, ow_count}),
      KOKKOS_LAMBDA(const std::int64_t i, const std::int64_t o, const std::int64_t oy,
                    const std::int64_t ox) {
        std::int32_t sum = 0;
        for (int c = 0; c < g.channels; ++c)
          for (int ky = 0; ky < g.kernel; ++ky) {
            const std::int64_t iy = oy * g.stride - g.padding + ky;
            if (iy < 0 || iy >= g.height) continue;
            for (int kx = 0; kx < g.kernel; ++kx) {
              const std::int64_t ix = ox * g.stride - g.padding + kx;
              if (ix < 0 || ix >= g.width) continue;
              const std::int64_t at = in_nhwc ? (iy * g.width + ix) * g.channels + c
                                              : (c * g.height + iy) * g.width + ix;
              const std::uint8_t byte =
                  xq(static_cast<std::size_t>(i) * image + static_cast<std::size_t>(at));
              const int v = is_unsigned ? static_cast<int>(byte)
                                        : static_cast<int>(static_cast<std::int8_t>(byte));
              sum += (v - zero) *
                     static_cast<int>(w(((o * g.channels + c) * g.kernel + ky) * g.kernel + kx));
            }
          }
        const std::int64_t at =
            out_nhwc ? (oy * ow_count + ox) * oc + o : (o * oh_count + oy) * ow_count + ox;
        const float before = accumulate ? y(i, at) : 0.0f;
        y(i, at) = int8_detail::apply(f, static_cast<float>(sum) * scales(o) + bias(o) + before);
      });
}

}  // namespace trellis::kernels
