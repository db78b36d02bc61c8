#include "trellis/int8/linear_layer.hpp"

#include "trellis/core/error.hpp"

namespace trellis::int8 {

namespace {

kernels::ByteView input_bytes(const nn::Layer& layer) {
  return kernels::ByteView(
      "trellis::int8::" + layer.name() + ".xq",
      static_cast<std::size_t>(layer.capacity()) * static_cast<std::size_t>(layer.in_features()));
}

[[noreturn]] void inference_only(const nn::Layer& layer) {
  throw Error("layer \"" + layer.name() + "\": an int8 layer is for inference only");
}

const nn::Linear& unsplit(const nn::Linear& linear) {
  if (linear.split() != nn::Split::none)
    throw Error("layer \"" + linear.name() +
                "\": a layer split over tensor-parallel ranks has no int8 form");
  return linear;
}

const nn::TiedHead& unsplit(const nn::TiedHead& head) {
  if (head.split())
    throw Error("layer \"" + head.name() +
                "\": a head split over tensor-parallel ranks has no int8 form");
  return head;
}

}  // namespace

Int8LinearLayer::Int8LinearLayer(const Int8Layer& q, const nn::Linear& linear,
                                 kernels::Int8Backend backend)
    : Layer(unsplit(linear).name(), linear.in_features(), linear.out_features(), linear.capacity(),
            InferenceOnly{}),
      kernel_(make_int8_linear(q, linear.in_features(), linear.out_features(), linear.bias_vector(),
                               linear.activation(), backend)),
      xq_(input_bytes(*this)) {}

Int8LinearLayer::Int8LinearLayer(const Int8Layer& q, const nn::TiedHead& head,
                                 kernels::Int8Backend backend)
    : Layer(unsplit(head).name(), head.in_features(), head.out_features(), head.capacity(),
            InferenceOnly{}),
      kernel_(make_int8_linear(q, head.in_features(), head.out_features(),
                               FloatView("trellis::int8::" + head.name() + ".zero_bias",
                                         static_cast<std::size_t>(head.out_features())),
                               kernels::Activation::none, backend)),
      xq_(input_bytes(*this)) {
  if (!q.bias.empty()) throw Error("int8 layer '" + q.name + "': the tied head has no bias");
}

void Int8LinearLayer::forward(ConstMatrix input, int n, const nn::StepContext&) {
  const ConstMatrix x = begin_forward(input, n);  // [n, in]
  kernels::quantize(kernels::flat(x), kernel_->input(), xq_);
  kernel_->forward(xq_, n, output_rows(n));
}

void Int8LinearLayer::forward_quantized_input(int n) { kernel_->forward(xq_, n, output_rows(n)); }

void Int8LinearLayer::backward(ConstMatrix, int) { inference_only(*this); }

Int8ConvLayer::Int8ConvLayer(const Int8Layer& q, const nn::Conv2d& conv,
                             kernels::Activation activation, kernels::Int8Backend backend)
    : Layer(conv.name(), conv.in_features(), conv.out_features(), conv.capacity(), InferenceOnly{}),
      kernel_(make_int8_conv(q, conv.geometry(), conv.out_channels(), conv.capacity(), activation,
                             backend)) {}

void Int8ConvLayer::forward(ConstMatrix input, int n, const nn::StepContext&) {
  kernel_->forward(begin_forward(input, n), n, output_rows(n));
}

void Int8ConvLayer::backward(ConstMatrix, int) { inference_only(*this); }

}  // namespace trellis::int8
