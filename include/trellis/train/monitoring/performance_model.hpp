// What the hardware could do and what the run gets out of it: the model's FLOPs per sample,
// the peak FLOP/s of one device, MFU, TFLOP/s and cost, for the metrics sinks and the budget.
// The arithmetic lives in utilisation.hpp (unit-tested); this part gathers its inputs once at
// set-up: FLOPs from the whole logical model (whatever this rank holds), the peak from
// monitor.peak_tflops, a known GPU's data sheet (CUDA builds), or an SGEMM measured by every
// rank at once (CPUs; the slowest rank sets it).
#pragma once

#include "trellis/nn/model.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/input/data_source.hpp"
#include "trellis/train/monitoring/utilisation.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trellis {

class PerformanceModel {
 public:
  // Collective over world (the measured peak). device: this rank's GPU, or -1.
  PerformanceModel(const TrainConfig& config, const DataShape& shape, const nn::Model& model,
                   int devices, int device, MPI_Comm world);

  double flops_per_sample() const { return flops_per_sample_; }
  double peak_tflops() const { return peak_tflops_; }
  const std::string& peak_source() const { return peak_source_; }
  int devices() const { return devices_; }

  double tflops(double samples_per_second) const {
    return flops_per_sample_ * samples_per_second * 1e-12;
  }
  double mfu(double samples_per_second) const {
    return model_flops_utilisation(flops_per_sample_, samples_per_second, devices_, peak_tflops_);
  }
  CostEstimate cost(double elapsed_s, std::int64_t steps_done, std::int64_t total_steps) const {
    return estimate_cost(elapsed_s, steps_done, total_steps, devices_, price_, spot_price_);
  }
  double price_per_device_hour() const { return price_; }
  double spot_price_per_device_hour() const { return spot_price_; }

 private:
  double flops_per_sample_ = 0;  // forward + backward of the whole model
  double peak_tflops_ = 0;       // per device
  std::string peak_source_;
  int devices_ = 1;
  double price_ = 0, spot_price_ = 0;
};

}  // namespace trellis
