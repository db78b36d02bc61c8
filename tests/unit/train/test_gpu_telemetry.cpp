// GPU telemetry: CPU builds have no GPU to read and say so; CUDA builds never throw, whether
// or not this machine has a driver, and an unavailable GPU always comes with its reason.
#include "catch.hpp"

#include "trellis/train/monitoring/gpu_telemetry.hpp"

#include <cmath>

using namespace trellis;

namespace {
bool all_nan(const GpuSample& s) {
  return std::isnan(s.utilization_pct) && std::isnan(s.memory_used_bytes) &&
         std::isnan(s.memory_total_bytes) && std::isnan(s.power_watts) &&
         std::isnan(s.temperature_c);
}
}  // namespace

#if !defined(TRELLIS_ENABLE_CUDA)

TEST_CASE("without CUDA the telemetry is unavailable and says why", "[telemetry]") {
  GpuTelemetry telemetry(0);
  CHECK_FALSE(telemetry.available());
  CHECK(telemetry.unavailable_reason() == "built without CUDA");
  const GpuSample sample = telemetry.sample();
  CHECK_FALSE(sample.valid);
  CHECK(all_nan(sample));  // no reading looks like a reading
  CHECK(telemetry.unavailable_reason() == "built without CUDA");
}

#else

TEST_CASE("GPU telemetry construction never throws", "[telemetry]") {
  CHECK_NOTHROW(GpuTelemetry(0));
  CHECK_NOTHROW(GpuTelemetry(-1));
  CHECK_NOTHROW(GpuTelemetry(1 << 20));  // no such device: unavailable, not an exception

  GpuTelemetry none(-1);
  CHECK_FALSE(none.available());
  CHECK_FALSE(none.sample().valid);
  CHECK_FALSE(none.unavailable_reason().empty());

  GpuTelemetry telemetry(0);
  GpuSample sample;
  CHECK_NOTHROW(sample = telemetry.sample());
  if (sample.valid) {
    CHECK(sample.memory_total_bytes > 0);
    CHECK(sample.memory_used_bytes <= sample.memory_total_bytes);
  } else {
    CHECK(all_nan(sample));
    CHECK_FALSE(telemetry.unavailable_reason().empty());
  }
}

#endif
