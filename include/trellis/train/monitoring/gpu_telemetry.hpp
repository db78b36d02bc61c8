// GPU telemetry through NVML (CUDA builds): utilisation, memory, power and temperature of the
// GPU a rank drives, read at step boundaries for the metrics. NVML queries the driver and does
// not synchronise with the device, so a sample costs no GPU time.
//
// NVML is loaded at run time (dlopen of the driver's libnvidia-ml.so.1), not linked: the build
// needs neither nvml.h nor a link stub, and the binary starts on machines without the driver
// library; telemetry is then unavailable, with dlopen's message as the reason.
//
// Which GPU: NVML numbers every GPU of the node in PCI order and ignores CUDA_VISIBLE_DEVICES,
// so CUDA's device i need not be NVML's device i. The GPU is found by its PCI bus id, which the
// CUDA runtime reports in its own numbering (cudaDeviceGetPCIBusId); only when the runtime
// cannot answer, and CUDA_VISIBLE_DEVICES is unset, is NVML's index used instead. On a MIG
// instance NVML sees the whole GPU (its utilisation is then not supported: NaN).
//
// Telemetry never stops training: a failure to start NVML (no driver, a container without
// NVIDIA's "utility" capability) or to read a sample is caught, its message kept in
// unavailable_reason(), and sample() returns valid = false. Readings a GPU does not support
// (power on some boards) are NaN in an otherwise valid sample. Builds without CUDA have the
// same class, always unavailable ("built without CUDA"). Construct after Kokkos::initialize.
#pragma once

#include <limits>
#include <memory>
#include <string>

struct nvmlDevice_st;  // nvml.h's device handle type, kept out of this header

namespace trellis {

namespace detail {
struct NvmlSession;  // the loaded library, its functions and nvmlInit/nvmlShutdown (the .cpp)
}  // namespace detail

// One reading of one GPU. valid = false: no reading at all (every field NaN).
struct GpuSample {
  bool valid = false;
  double utilization_pct = std::numeric_limits<double>::quiet_NaN();  // time a kernel ran, %
  double memory_used_bytes = std::numeric_limits<double>::quiet_NaN();
  double memory_total_bytes = std::numeric_limits<double>::quiet_NaN();
  double power_watts = std::numeric_limits<double>::quiet_NaN();
  double temperature_c = std::numeric_limits<double>::quiet_NaN();  // GPU die
};

class GpuTelemetry {
 public:
  // device: the CUDA device index this rank drives (NodeBinding::device); < 0: none.
  // Never throws for an unavailable GPU or driver.
  explicit GpuTelemetry(int device);
  ~GpuTelemetry();  // nvmlShutdown and dlclose when they are owed
  GpuTelemetry(const GpuTelemetry&) = delete;
  GpuTelemetry& operator=(const GpuTelemetry&) = delete;

  // Reads the GPU now (a few driver calls, well under a millisecond). Never throws.
  GpuSample sample();
  // Whether the constructor found the GPU (sample() may still fail later).
  bool available() const { return device_ != nullptr; }
  // Why sample() returned or will return valid = false: the last failure (from the
  // constructor or a sample), "" when there was none.
  std::string unavailable_reason() const { return reason_; }

 private:
  std::unique_ptr<detail::NvmlSession> nvml_;  // null when NVML could not be loaded or started
  nvmlDevice_st* device_ = nullptr;            // nvmlDevice_t; null when unavailable
  std::string reason_;
};

}  // namespace trellis
