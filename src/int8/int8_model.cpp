#include "trellis/int8/int8_model.hpp"

#include "trellis/core/error.hpp"

namespace trellis::int8 {

Int8Model::Int8Model(nn::Model& fp32) : fp32_(fp32) {
  if (!fp32.first_stage() || !fp32.last_stage())
    throw Error("int8: " + fp32.describe() +
                " is a pipeline stage; int8 inference takes a whole model");
}

void Int8Model::backward(ConstMatrix, int) {
  throw Error("int8 model " + describe() + ": inference only, no backward");
}

void Int8Model::keep(std::unique_ptr<nn::Model> fp32) {
  TRELLIS_REQUIRE(fp32.get() == &fp32_, "int8: keep() takes the model this one was converted from");
  owned_ = std::move(fp32);
}

}  // namespace trellis::int8
