#include "trellis/train/monitoring/performance_model.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/train/model/model_registry.hpp"

#ifdef TRELLIS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include <numeric>
#include <vector>

namespace trellis {

namespace {

// Data-sheet fp32 peak of this rank's GPU; 0 when unknown or not a CUDA build.
double device_peak_tflops(int device, std::string& source) {
#ifdef TRELLIS_ENABLE_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device < 0 ? 0 : device) == cudaSuccess) {
    source = std::string(prop.name) + ", fp32 data-sheet peak";
    return known_peak_tflops(prop.name, "fp32");
  }
#else
  (void)device;
  (void)source;
#endif
  return 0.0;
}

}  // namespace

PerformanceModel::PerformanceModel(const TrainConfig& config, const DataShape& shape,
                                   const nn::Model& model, int devices, int device, MPI_Comm world)
    : devices_(devices),
      price_(config.cost.price_per_device_hour),
      spot_price_(config.cost.spot_price_per_device_hour) {
  flops_per_sample_ =
      model_registration(config.model.type).flops_per_sample(config.model, shape, model);
  if (config.monitor.peak_tflops > 0) {
    peak_tflops_ = config.monitor.peak_tflops;
    peak_source_ = "monitor.peak_tflops";
    return;
  }
  peak_tflops_ = device_peak_tflops(device, peak_source_);
  if (peak_tflops_ > 0) return;
  // Every rank measures at once, as they will train: ranks sharing cores or memory bandwidth
  // see their share.
  double measured = measure_gemm_tflops();
  TRELLIS_MPI(MPI_Allreduce(MPI_IN_PLACE, &measured, 1, MPI_DOUBLE, MPI_MIN, world));
  peak_tflops_ = measured;
  peak_source_ = "SGEMM 512^3 measured at start-up";
}

}  // namespace trellis
