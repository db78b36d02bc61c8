// LossScaler (optim/loss_scaler.hpp): Megatron-LM's dynamic semantics step by step, the
// static and disabled scalers, and the state a checkpoint carries.
#include "catch.hpp"

#include "trellis/core/error.hpp"
#include "trellis/optim/loss_scaler.hpp"

using trellis::LossScaler;
using trellis::LossScaleSpec;

namespace {
LossScaleSpec dynamic_spec() {
  LossScaleSpec spec;
  spec.enabled = true;
  spec.initial_scale = 1024;
  spec.growth_interval = 3;
  spec.hysteresis = 2;
  spec.min_scale = 64;
  return spec;
}
}  // namespace

TEST_CASE("overflow backs the scale off only after the hysteresis allowance", "[loss_scale]") {
  LossScaler s(dynamic_spec());
  CHECK(s.scale() == 1024);
  s.update(true);  // first overflow: hysteresis 2 -> 1, scale kept
  CHECK(s.scale() == 1024);
  s.update(true);  // second: allowance spent, back off
  CHECK(s.scale() == 512);
  s.update(true);  // every further overflow backs off until growth restores the allowance
  CHECK(s.scale() == 256);
  s.update(false);
  s.update(true);  // a clean step in between does not restore the allowance
  CHECK(s.scale() == 128);
  CHECK(s.state().growth_tracker == 0);
}

TEST_CASE("the scale grows after growth_interval clean steps and stops at min_scale",
          "[loss_scale]") {
  LossScaler s(dynamic_spec());
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 1024);
  s.update(false);  // third clean step in a row: grow
  CHECK(s.scale() == 2048);
  CHECK(s.state().growth_tracker == 0);
  s.update(false);
  s.update(true);  // an overflow restarts the count
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 2048);
  s.update(false);
  CHECK(s.scale() == 4096);
  const std::int64_t before = s.state().overflows;
  int counted = 0;
  for (int i = 0; i < 20; ++i) counted += s.update(true) ? 1 : 0;
  CHECK(s.scale() == 64);  // floored
  CHECK(s.at_minimum());
  // Overflows count while the scale can back off; at the floor they are divergences.
  CHECK(counted == 7);  // 4096 -> 64: hysteresis step, then 6 back-offs, then at the floor
  CHECK(s.state().overflows == before + counted);
  CHECK_FALSE(s.update(true));
}

TEST_CASE("static and disabled scalers never move", "[loss_scale]") {
  LossScaleSpec fixed = dynamic_spec();
  fixed.dynamic = false;
  LossScaler s(fixed);
  for (int i = 0; i < 10; ++i) s.update(i % 2 == 0);
  CHECK(s.scale() == 1024);
  CHECK_FALSE(s.dynamic());
  LossScaler off{LossScaleSpec{}};
  off.update(true);
  CHECK(off.scale() == 1);
  CHECK_FALSE(off.enabled());
}

TEST_CASE("the scaler state restores exactly and rejects damage", "[loss_scale]") {
  LossScaler a(dynamic_spec()), b(dynamic_spec());
  for (bool overflow : {false, true, false, false, false, true, true, false}) a.update(overflow);
  b.restore(a.state());
  for (bool overflow : {false, false, true, true, false, false, false, false}) {
    a.update(overflow);
    b.update(overflow);
    REQUIRE(a.scale() == b.scale());
    REQUIRE(a.state().growth_tracker == b.state().growth_tracker);
    REQUIRE(a.state().hysteresis_left == b.state().hysteresis_left);
    REQUIRE(a.state().overflows == b.state().overflows);
  }
  LossScaler::State bad;
  bad.scale = -1;
  CHECK_THROWS_AS(b.restore(bad), trellis::Error);
}

TEST_CASE("loss scaling rejects factors that cannot work", "[loss_scale]") {
  LossScaleSpec spec = dynamic_spec();
  spec.growth_factor = 1;
  CHECK_THROWS_AS(LossScaler(spec), trellis::ConfigError);
  spec = dynamic_spec();
  spec.backoff_factor = 1.5f;
  CHECK_THROWS_AS(LossScaler(spec), trellis::ConfigError);
  spec = dynamic_spec();
  spec.min_scale = 4096;
  CHECK_THROWS_AS(LossScaler(spec), trellis::ConfigError);
}
