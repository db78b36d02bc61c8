// Monitoring arithmetic: data-sheet peaks, MFU, cost and its projection, RSS, and that the
// measured SGEMM peak is a positive, plausible number.
#include "catch.hpp"

#include "trellis/train/monitoring/utilisation.hpp"

using namespace trellis;

TEST_CASE("known GPU peaks by name and precision", "[monitor]") {
  CHECK(known_peak_tflops("NVIDIA A100-SXM4-80GB", "bf16") == 312.0);
  CHECK(known_peak_tflops("NVIDIA A100-SXM4-80GB", "tf32") == 156.0);
  CHECK(known_peak_tflops("NVIDIA H100 80GB HBM3", "fp16") == 989.0);
  CHECK(known_peak_tflops("NVIDIA H200", "fp32") == 67.0);
  CHECK(known_peak_tflops("NVIDIA H200", "int4") == 0.0);
  CHECK(known_peak_tflops("AMD EPYC", "fp32") == 0.0);
}

TEST_CASE("MFU is achieved FLOP/s per device over the peak", "[monitor]") {
  // 6e9 FLOPs per sample x 1000 samples/s over 4 devices = 1.5e12 per device; peak 15 TFLOP/s.
  CHECK(model_flops_utilisation(6e9, 1000.0, 4, 15.0) == Approx(0.1));
  CHECK(model_flops_utilisation(6e9, 1000.0, 4, 0.0) == 0.0);
}

TEST_CASE("cost so far and projected to the end of the run", "[monitor]") {
  // 8 devices for 30 minutes = 4 device-hours; a quarter of the steps done.
  const CostEstimate c = estimate_cost(1800.0, 250, 1000, 8, 2.5, 0.75);
  CHECK(c.device_hours == Approx(4.0));
  CHECK(c.on_demand == Approx(10.0));
  CHECK(c.spot == Approx(3.0));
  CHECK(c.projected_on_demand == Approx(40.0));
  CHECK(c.projected_spot == Approx(12.0));
  const CostEstimate none = estimate_cost(10.0, 0, 1000, 1, 2.5, 0.0);
  CHECK(none.projected_on_demand == 0.0);
}

TEST_CASE("resident memory and a measured GEMM peak are plausible", "[monitor]") {
  CHECK(resident_bytes() > (1 << 20));
  const double tflops = measure_gemm_tflops(128, 0.05);
  CHECK(tflops > 1e-4);  // more than 0.1 GFLOP/s
  CHECK(tflops < 1e4);
}
