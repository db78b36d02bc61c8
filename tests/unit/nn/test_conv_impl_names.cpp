// kernels.conv's values: the errors name the config key a user sets (regression: they named
// "model.conv_impl", a key that does not exist).
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/nn/conv2d.hpp"

#include <string>

namespace {

std::string config_error(const std::string& name) {
  try {
    trellis::nn::parse_conv_impl(name);
  } catch (const trellis::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("kernels.conv errors name kernels.conv", "[cnn][config]") {
  CHECK(trellis::nn::parse_conv_impl("auto") == trellis::nn::ConvImpl::automatic);
  CHECK(trellis::nn::parse_conv_impl("im2col") == trellis::nn::ConvImpl::im2col);
  const std::string unknown = config_error("winograd");
  CHECK(unknown.find("kernels.conv") != std::string::npos);
  CHECK(unknown.find("conv_impl") == std::string::npos);
  // The vendor this build does not have (cuDNN on a host build, oneDNN on a CUDA build).
  const std::string missing =
      config_error(trellis::nn::vendor_conv_name() == std::string("cudnn") ? "onednn" : "cudnn");
  CHECK(missing.find("kernels.conv") != std::string::npos);
  CHECK(missing.find("conv_impl") == std::string::npos);
}
