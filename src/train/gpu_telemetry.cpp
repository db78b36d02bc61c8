#include "trellis/train/gpu_telemetry.hpp"

#if defined(TRELLIS_ENABLE_CUDA)

#include "trellis/core/error.hpp"

#include <cuda_runtime.h>
#include <nvml.h>

#include <cstdlib>
#include <exception>
#include <limits>
#include <string>

// TRELLIS_NVML(call): runs an NVML call and throws trellis::Error naming the call and NVML's
// error string when it does not return NVML_SUCCESS.
#define TRELLIS_NVML(call)                                                                      \
  do {                                                                                          \
    const nvmlReturn_t trellis_nvml_rc_ = (call);                                               \
    if (trellis_nvml_rc_ != NVML_SUCCESS)                                                       \
      ::trellis::throw_call_failure("NVML", #call, nvmlErrorString(trellis_nvml_rc_), __FILE__, \
                                    __LINE__);                                                  \
  } while (0)

// TRELLIS_NVML_SUPPORTED(call): true when the call succeeded, false when this GPU does not
// support it (NVML_ERROR_NOT_SUPPORTED); throws like TRELLIS_NVML on any other failure.
#define TRELLIS_NVML_SUPPORTED(call) ::trellis::nvml_supported((call), #call, __FILE__, __LINE__)

namespace trellis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool nvml_supported(nvmlReturn_t rc, const char* call, const char* file, int line) {
  if (rc == NVML_ERROR_NOT_SUPPORTED) return false;
  if (rc != NVML_SUCCESS) throw_call_failure("NVML", call, nvmlErrorString(rc), file, line);
  return true;
}

// NVML's handle of CUDA device `device` (see the header on why by PCI bus id).
nvmlDevice_t find_device(int device) {
  nvmlDevice_t handle = nullptr;
  char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE] = {};
  const cudaError_t rc = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device);
  if (rc == cudaSuccess) {
    TRELLIS_NVML(nvmlDeviceGetHandleByPciBusId_v2(bus_id, &handle));
    return handle;
  }
  (void)cudaGetLastError();  // leave no error behind for Kokkos' next check
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && *visible != '\0')
    throw_call_failure("CUDA", "cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device)",
                       std::string(cudaGetErrorString(rc)) +
                           " (CUDA_VISIBLE_DEVICES is set, so NVML's device index would not "
                           "name the same GPU)",
                       __FILE__, __LINE__);
  TRELLIS_NVML(nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned int>(device), &handle));
  return handle;
}

// nvml.h marks nvmlDeviceGetTemperature deprecated from CUDA 13.1 on, for
// nvmlDeviceGetTemperatureV, which older drivers lack (calling it there ends the process with a
// symbol lookup error). The old call works on every driver, so its deprecation is silenced.
#if defined(__NVCC__) && __CUDACC_VER_MAJOR__ >= 13
#pragma nv_diag_suppress 1215, 1444
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
nvmlReturn_t read_gpu_temperature(nvmlDevice_t device, unsigned int* celsius) {
  return nvmlDeviceGetTemperature(device, NVML_TEMPERATURE_GPU, celsius);
}
#pragma GCC diagnostic pop
#if defined(__NVCC__) && __CUDACC_VER_MAJOR__ >= 13
#pragma nv_diag_default 1215, 1444
#endif

}  // namespace

GpuTelemetry::GpuTelemetry(int device) {
  if (device < 0) {
    reason_ = "no GPU is bound to this rank (device index " + std::to_string(device) + ")";
    return;
  }
  try {
    TRELLIS_NVML(nvmlInit_v2());
    initialised_ = true;
    device_ = find_device(device);
  } catch (const std::exception& e) {
    reason_ = e.what();
    device_ = nullptr;
    shut_down();
  }
}

GpuTelemetry::~GpuTelemetry() { shut_down(); }

void GpuTelemetry::shut_down() noexcept {
  if (initialised_) (void)nvmlShutdown();  // nothing to do about a failure at teardown
  initialised_ = false;
}

GpuSample GpuTelemetry::sample() {
  GpuSample sample;
  if (device_ == nullptr) return sample;
  try {
    nvmlMemory_t memory{};
    TRELLIS_NVML(nvmlDeviceGetMemoryInfo(device_, &memory));
    nvmlUtilization_t utilization{};
    const bool has_utilization =
        TRELLIS_NVML_SUPPORTED(nvmlDeviceGetUtilizationRates(device_, &utilization));
    unsigned int milliwatts = 0;
    const bool has_power = TRELLIS_NVML_SUPPORTED(nvmlDeviceGetPowerUsage(device_, &milliwatts));
    unsigned int celsius = 0;
    const bool has_temperature = TRELLIS_NVML_SUPPORTED(read_gpu_temperature(device_, &celsius));

    sample.memory_used_bytes = static_cast<double>(memory.used);
    sample.memory_total_bytes = static_cast<double>(memory.total);
    sample.utilization_pct = has_utilization ? static_cast<double>(utilization.gpu) : kNaN;
    sample.power_watts = has_power ? static_cast<double>(milliwatts) * 1e-3 : kNaN;
    sample.temperature_c = has_temperature ? static_cast<double>(celsius) : kNaN;
    sample.valid = true;
  } catch (const std::exception& e) {
    reason_ = e.what();
    sample = GpuSample{};
  }
  return sample;
}

}  // namespace trellis

#else  // !TRELLIS_ENABLE_CUDA: no GPU to read; the honest answer is "no sample".

namespace trellis {

GpuTelemetry::GpuTelemetry(int /*device*/) : reason_("built without CUDA") {}
GpuTelemetry::~GpuTelemetry() = default;
void GpuTelemetry::shut_down() noexcept {}
GpuSample GpuTelemetry::sample() { return GpuSample{}; }

}  // namespace trellis

#endif  // TRELLIS_ENABLE_CUDA
