// What a run costs and how well it uses the hardware: peak FLOP/s of the device, model FLOPs
// utilisation (MFU), memory, device-hours and money. Pure arithmetic here (unit-tested); the
// trainer feeds it measured times.
//
// MFU = (model FLOPs per sample x samples per second) / (devices x peak FLOP/s of one device),
// with the model's FLOPs counted from its shapes (Model::flops_per_sample, the whole logical
// model whatever the layout) — PaLM's definition: recomputation and padding do not count.
//
// Peaks (dense, no sparsity), TFLOP/s per GPU, from NVIDIA's data sheets (SXM parts):
//               bf16    fp16    tf32    fp32
//   A100         312     312     156    19.5
//   H100         989     989     495    67
//   H200         989     989     495    67
// On CPUs there is no table that fits every box: the peak is a single-rank SGEMM measured at
// start-up (monitor.peak_tflops overrides either).
#pragma once

#include <cstdint>
#include <string>

namespace trellis {

// TFLOP/s of one device named like "NVIDIA H100 80GB HBM3" (substring match on A100, H100,
// H200) at precision "bf16" | "fp16" | "tf32" | "fp32"; 0 when unknown.
double known_peak_tflops(const std::string& device_name, const std::string& precision);

// Sustained single-precision GEMM rate of this rank (TFLOP/s): n x n x n products for about
// `seconds`, best of the repetitions. Uses the same GEMM the layers use.
double measure_gemm_tflops(int n = 512, double seconds = 0.3);

// Achieved FLOP/s per device over the peak; 0 when the peak is unknown.
double model_flops_utilisation(double flops_per_sample, double samples_per_second, int devices,
                               double peak_tflops_per_device);

// This process' resident set size in bytes (Linux /proc/self/statm), 0 if unreadable.
std::int64_t resident_bytes();

struct CostEstimate {
  double device_hours = 0;
  double on_demand = 0;            // device_hours x cost.price_per_device_hour
  double spot = 0;                 // device_hours x cost.spot_price_per_device_hour
  double projected_on_demand = 0;  // the whole run at the current rate
  double projected_spot = 0;
};

// elapsed_s: wall time so far; steps_done of total_steps; devices: ranks (one per device).
CostEstimate estimate_cost(double elapsed_s, std::int64_t steps_done, std::int64_t total_steps,
                           int devices, double price_per_device_hour,
                           double spot_price_per_device_hour);

}  // namespace trellis
