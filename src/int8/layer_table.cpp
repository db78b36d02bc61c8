#include "trellis/int8/layer_table.hpp"

#include "trellis/core/error.hpp"
#include "trellis/core/host_copy.hpp"

#include <algorithm>

namespace trellis::int8 {

Int8LayerTable::Int8LayerTable(const std::vector<Int8Layer>& layers) {
  for (const Int8Layer& layer : layers)
    if (!layers_.emplace(layer.name, &layer).second)
      throw Error("int8 layer '" + layer.name + "' appears twice");
}

const Int8Layer& Int8LayerTable::take(const std::string& name) {
  const auto it = layers_.find(name);
  if (it == layers_.end())
    throw Error("int8 model: no int8 layer '" + name +
                "' (trellis quantize writes every Linear, convolution and head of the model)");
  taken_.insert(name);
  return *it->second;
}

void Int8LayerTable::require_all_taken() const {
  for (const auto& [name, layer] : layers_)
    if (taken_.count(name) == 0)
      throw Error("int8 layer '" + name +
                  "': the model has no Linear, Conv2d or head of that name");
}

namespace {

void require_weights_fit(const Int8Layer& q) {
  std::int64_t numel = 1;
  for (const std::int64_t d : q.weight_shape) numel *= d;
  const auto out = static_cast<std::size_t>(q.out());
  if (q.weight.size() != static_cast<std::size_t>(numel) || q.weight_scale.size() != out ||
      (!q.bias.empty() && q.bias.size() != out))
    throw Error("int8 layer '" + q.name + "': weights, scales and bias do not fit " +
                shape_string(q.weight_shape));
}

kernels::Int8View device_weights(const Int8Layer& q) {
  kernels::Int8View weight("trellis::int8::weight", q.weight.size());
  const auto host = Kokkos::create_mirror_view(HostSpace(), weight);
  std::copy(q.weight.begin(), q.weight.end(), host.data());
  Kokkos::deep_copy(weight, host);
  return weight;
}

FloatView device_floats(const std::string& label, const std::vector<float>& values) {
  FloatView v(label, values.size());
  copy_from_host(values, v);
  return v;
}

}  // namespace

std::unique_ptr<kernels::Int8Linear> make_int8_linear(const Int8Layer& q, int in, int out,
                                                      kernels::ConstVector bias,
                                                      kernels::Activation activation,
                                                      kernels::Int8Backend backend) {
  if (q.is_conv() || q.weight_shape.size() != 2 || q.weight_shape[0] != out ||
      q.weight_shape[1] != in)
    throw Error("int8 layer '" + q.name + "': " + shape_string(q.weight_shape) +
                " for a Linear of [" + std::to_string(out) + ", " + std::to_string(in) + "]");
  require_weights_fit(q);
  return std::make_unique<kernels::Int8Linear>(
      q.name, in, out, device_weights(q), device_floats("trellis::int8::scales", q.weight_scale),
      bias, q.input, activation, backend);
}

std::unique_ptr<kernels::Int8Conv2d> make_int8_conv(const Int8Layer& q,
                                                    const kernels::ConvGeometry& geometry,
                                                    int out_channels, int capacity,
                                                    kernels::Activation activation,
                                                    kernels::Int8Backend backend) {
  if (q.weight_shape != Shape{out_channels, geometry.channels, geometry.kernel, geometry.kernel})
    throw Error("int8 layer '" + q.name + "': " + shape_string(q.weight_shape) +
                " for a convolution of " + std::to_string(out_channels) + " channels over " +
                geometry.describe());
  require_weights_fit(q);
  const std::vector<float> bias =
      q.bias.empty() ? std::vector<float>(static_cast<std::size_t>(out_channels), 0.0f) : q.bias;
  return std::make_unique<kernels::Int8Conv2d>(
      q.name, geometry, out_channels, device_weights(q),
      device_floats("trellis::int8::scales", q.weight_scale),
      device_floats("trellis::int8::bias", bias), q.input, activation, capacity, backend);
}

}  // namespace trellis::int8
