#include "trellis/train/files/int8_weights.hpp"

#include "trellis/core/durable_file.hpp"
#include "trellis/core/error.hpp"
#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_attributes.hpp"
#include "trellis/train/files/weights_file.hpp"

#include <Kokkos_Core.hpp>

#include <cstdio>

namespace trellis {

namespace {

constexpr const char* kInt8 = "int8";

// Creates the groups of `name` ("params/fc1.weight" needs "params") and the dataset.
void write_dataset(hid_t file, const std::string& name, hid_t type, const Shape& shape,
                   const void* data) {
  H5Plist links(TRELLIS_H5(H5Pcreate(H5P_LINK_CREATE)));
  TRELLIS_H5(H5Pset_create_intermediate_group(links.get(), 1));
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  H5Space space(TRELLIS_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5Dataset dataset(TRELLIS_H5(
      H5Dcreate2(file, name.c_str(), type, space.get(), links.get(), H5P_DEFAULT, H5P_DEFAULT)));
  TRELLIS_H5(H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

template <class View>
void write_floats(hid_t file, const std::string& name, const Shape& shape, const View& view) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), view);
  write_dataset(file, name, H5T_NATIVE_FLOAT, shape, host.data());
}

Shape dataset_shape(hid_t dataset) {
  H5Space space(TRELLIS_H5(H5Dget_space(dataset)));
  const int rank = TRELLIS_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  TRELLIS_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return Shape(dims.begin(), dims.end());
}

}  // namespace

bool is_int8_weights(const std::string& path) {
  H5File file = open_weights_file(path);
  return has_attribute(file.get(), "quantization") &&
         read_string_attribute(file.get(), "quantization") == kInt8;
}

std::set<std::string> int8_weight_names(const std::vector<int8::Int8Layer>& layers) {
  std::set<std::string> names;
  for (const int8::Int8Layer& layer : layers) {
    names.insert(layer.name + ".weight");
    if (layer.is_conv()) names.insert(layer.name + ".bias");
  }
  return names;
}

void write_int8_weights(const std::string& path, const nn::ParameterStore& store,
                        const std::vector<nn::NamedBuffer>& buffers,
                        const std::vector<int8::Int8Layer>& layers, const std::string& config_ini,
                        const std::string& calibration, const std::string& tokenizer_json) {
  const std::string tmp = path + ".tmp";
  try {
    {
      hdf5_quiet();
      const hid_t id = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      if (id < 0) throw Error(tmp + ": cannot create file: " + hdf5_error_detail());
      H5File file(id);
      write_weights_root(file.get(), config_ini, tokenizer_json);
      write_string_attribute(file.get(), "quantization", kInt8);
      write_string_attribute(file.get(), "calibration", calibration);
      const std::set<std::string> quantized = int8_weight_names(layers);
      for (std::size_t i = 0; i < store.size(); ++i) {
        const nn::ParamInfo& info = store.info(i);
        if (quantized.count(info.name) == 0)
          write_floats(file.get(), "params/" + info.name, info.logical_shape, store.param(i));
      }
      for (const nn::NamedBuffer& buffer : buffers)
        write_floats(file.get(), "buffers/" + buffer.name,
                     {static_cast<std::int64_t>(buffer.data.extent(0))}, buffer.data);
      for (const int8::Int8Layer& layer : layers) {
        const std::string group = std::string(kInt8) + "/" + layer.name;
        write_dataset(file.get(), group + "/weight", H5T_NATIVE_INT8, layer.weight_shape,
                      layer.weight.data());
        write_dataset(file.get(), group + "/weight_scale", H5T_NATIVE_FLOAT, {layer.out()},
                      layer.weight_scale.data());
        if (!layer.bias.empty())
          write_dataset(file.get(), group + "/bias", H5T_NATIVE_FLOAT, {layer.out()},
                        layer.bias.data());
        H5Group g(TRELLIS_H5(H5Gopen2(file.get(), group.c_str(), H5P_DEFAULT)));
        if (!layer.folded_norm.empty())
          write_string_attribute(g.get(), "folded_norm", layer.folded_norm);
        write_string_attribute(g.get(), "input_type", kernels::quant_type_name(layer.input.type));
        write_float_attribute(g.get(), "input_scale", {layer.input.scale}, true);
        write_int_attribute(g.get(), "input_zero_point", layer.input.zero_point);
      }
      TRELLIS_H5(H5Fflush(file.get(), H5F_SCOPE_GLOBAL));
    }
    publish_by_rename(tmp, path);
  } catch (...) {
    std::remove(tmp.c_str());  // best effort: never a half-written file under either name
    throw;
  }
}

std::vector<int8::Int8Layer> read_int8_layers(const std::string& path) {
  H5File file = open_weights_file(path);
  std::vector<int8::Int8Layer> layers;
  if (H5Lexists(file.get(), kInt8, H5P_DEFAULT) <= 0) return layers;
  H5Group root(TRELLIS_H5(H5Gopen2(file.get(), kInt8, H5P_DEFAULT)));
  H5G_info_t info;
  TRELLIS_H5(H5Gget_info(root.get(), &info));
  for (hsize_t i = 0; i < info.nlinks; ++i) {  // in name order
    const ssize_t length = TRELLIS_H5(H5Lget_name_by_idx(root.get(), ".", H5_INDEX_NAME,
                                                         H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT));
    std::string name(static_cast<std::size_t>(length) + 1, '\0');
    TRELLIS_H5(H5Lget_name_by_idx(root.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                                  name.size(), H5P_DEFAULT));
    name.resize(static_cast<std::size_t>(length));
    const std::string group = std::string(kInt8) + "/" + name;
    auto bad = [&](const std::string& what) {
      return InputError(path + ": int8 layer '/" + group + "': " + what);
    };
    int8::Int8Layer layer;
    layer.name = name;
    H5Group g(TRELLIS_H5(H5Gopen2(file.get(), group.c_str(), H5P_DEFAULT)));
    for (const char* dataset : {"weight", "weight_scale"})
      if (H5Lexists(g.get(), dataset, H5P_DEFAULT) <= 0)
        throw bad(std::string("missing dataset '") + dataset + "'");
    H5Dataset weight(TRELLIS_H5(H5Dopen2(g.get(), "weight", H5P_DEFAULT)));
    const Shape shape = dataset_shape(weight.get());
    if (shape.size() != 2 && shape.size() != 4)
      throw bad("weight must be [out, in] or [out, C, k, k], found " + shape_string(shape));
    layer.weight_shape = shape;
    std::size_t numel = 1;
    for (const std::int64_t d : shape) numel *= static_cast<std::size_t>(d);
    layer.weight.resize(numel);
    TRELLIS_H5(
        H5Dread(weight.get(), H5T_NATIVE_INT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, layer.weight.data()));
    H5Dataset scale(TRELLIS_H5(H5Dopen2(g.get(), "weight_scale", H5P_DEFAULT)));
    const Shape per_output{layer.out()};
    if (dataset_shape(scale.get()) != per_output)
      throw bad("weight_scale must be " + shape_string(per_output));
    layer.weight_scale.resize(static_cast<std::size_t>(layer.out()));
    TRELLIS_H5(H5Dread(scale.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       layer.weight_scale.data()));
    if (H5Lexists(g.get(), "bias", H5P_DEFAULT) > 0) {
      H5Dataset bias(TRELLIS_H5(H5Dopen2(g.get(), "bias", H5P_DEFAULT)));
      if (dataset_shape(bias.get()) != per_output)
        throw bad("bias must be " + shape_string(per_output));
      layer.bias.resize(static_cast<std::size_t>(layer.out()));
      TRELLIS_H5(
          H5Dread(bias.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, layer.bias.data()));
    }
    if (has_attribute(g.get(), "folded_norm"))
      layer.folded_norm = read_string_attribute(g.get(), "folded_norm");
    for (const char* attribute : {"input_type", "input_scale", "input_zero_point"})
      if (!has_attribute(g.get(), attribute))
        throw bad(std::string("missing attribute '") + attribute + "'");
    const std::string type = read_string_attribute(g.get(), "input_type");
    if (type != "u8" && type != "s8") throw bad("input_type '" + type + "', expected u8 or s8");
    layer.input.type = type == "u8" ? kernels::QuantType::u8 : kernels::QuantType::s8;
    layer.input.scale = static_cast<float>(read_float_attribute(g.get(), "input_scale").at(0));
    layer.input.zero_point = static_cast<int>(read_int_attribute(g.get(), "input_zero_point"));
    if (!(layer.input.scale > 0))
      throw bad("input_scale " + std::to_string(layer.input.scale) + " must be positive");
    if (layer.input.zero_point < layer.input.qmin() || layer.input.zero_point > layer.input.qmax())
      throw bad("input_zero_point " + std::to_string(layer.input.zero_point) + " outside [" +
                std::to_string(layer.input.qmin()) + ", " + std::to_string(layer.input.qmax()) +
                "]");
    for (const float s : layer.weight_scale)
      if (!(s > 0)) throw bad("weight_scale has a value that is not positive");
    layers.push_back(std::move(layer));
  }
  return layers;
}

}  // namespace trellis
