#include "trellis/train/monitoring/gpu_telemetry.hpp"

#if defined(TRELLIS_ENABLE_CUDA)

#include "trellis/core/error.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <limits>
#include <string>

namespace trellis {

namespace {

// The part of NVML's C API used here, declared locally because nvml.h is optional (the
// driver's library is loaded at run time). Values and layouts are NVML's stable ABI.
namespace nvml {
using Return = int;                           // nvmlReturn_t
constexpr Return kSuccess = 0;                // NVML_SUCCESS
constexpr Return kErrorNotSupported = 3;      // NVML_ERROR_NOT_SUPPORTED
constexpr int kTemperatureGpu = 0;            // NVML_TEMPERATURE_GPU
constexpr unsigned int kPciBusIdLength = 32;  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
using Device = nvmlDevice_st*;                // nvmlDevice_t
struct Memory {                               // nvmlMemory_t (version 1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
}  // namespace nvml

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";  // installed with the driver

// A dlopen handle, closed when it goes out of scope.
class SharedLibrary {
 public:
  explicit SharedLibrary(const char* name) : handle_(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) {
      const char* why = dlerror();
      throw Error(std::string("cannot load ") + name + ": " + (why ? why : "unknown error"));
    }
  }
  ~SharedLibrary() { (void)dlclose(handle_); }  // nothing to do about a failure at teardown
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The function `name` of the library as a pointer of type F; throws when it is missing.
  template <typename F>
  F function(const char* name) const {
    void* address = dlsym(handle_, name);
    if (address == nullptr)
      throw Error(std::string(kNvmlLibrary) + " has no function " + name +
                  " (an NVML older than this build expects)");
    return reinterpret_cast<F>(address);
  }

 private:
  void* handle_;
};

}  // namespace

namespace detail {

// NVML loaded and started: the library, the functions Trellis calls, and nvmlInit_v2 done;
// the destructor calls nvmlShutdown before the library is closed.
struct NvmlSession {
  SharedLibrary library{kNvmlLibrary};
  nvml::Return (*init)() = library.function<nvml::Return (*)()>("nvmlInit_v2");
  nvml::Return (*shutdown)() = library.function<nvml::Return (*)()>("nvmlShutdown");
  const char* (*error_string)(nvml::Return) =
      library.function<const char* (*)(nvml::Return)>("nvmlErrorString");
  nvml::Return (*handle_by_pci_bus_id)(const char*, nvml::Device*) =
      library.function<nvml::Return (*)(const char*, nvml::Device*)>(
          "nvmlDeviceGetHandleByPciBusId_v2");
  nvml::Return (*handle_by_index)(unsigned int, nvml::Device*) =
      library.function<nvml::Return (*)(unsigned int, nvml::Device*)>(
          "nvmlDeviceGetHandleByIndex_v2");
  nvml::Return (*memory_info)(nvml::Device, nvml::Memory*) =
      library.function<nvml::Return (*)(nvml::Device, nvml::Memory*)>("nvmlDeviceGetMemoryInfo");
  nvml::Return (*utilization_rates)(nvml::Device, nvml::Utilization*) =
      library.function<nvml::Return (*)(nvml::Device, nvml::Utilization*)>(
          "nvmlDeviceGetUtilizationRates");
  nvml::Return (*power_usage)(nvml::Device, unsigned int*) =
      library.function<nvml::Return (*)(nvml::Device, unsigned int*)>("nvmlDeviceGetPowerUsage");
  // nvmlDeviceGetTemperature is deprecated from CUDA 13.1 on for nvmlDeviceGetTemperatureV,
  // which older drivers lack; the old call works on every driver.
  nvml::Return (*temperature)(nvml::Device, int, unsigned int*) =
      library.function<nvml::Return (*)(nvml::Device, int, unsigned int*)>(
          "nvmlDeviceGetTemperature");

  NvmlSession() { check(init(), "nvmlInit_v2()", __LINE__); }
  ~NvmlSession() { (void)shutdown(); }  // nothing to do about a failure at teardown
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  // Throws trellis::Error naming the call and NVML's error string unless rc is success.
  void check(nvml::Return rc, const char* call, int line) const {
    if (rc == nvml::kSuccess) return;
    const char* why = error_string(rc);
    throw_call_failure("NVML", call, why ? why : "error " + std::to_string(rc), __FILE__, line);
  }
  // True when the call succeeded, false when this GPU does not support it; throws otherwise.
  bool supported(nvml::Return rc, const char* call, int line) const {
    if (rc == nvml::kErrorNotSupported) return false;
    check(rc, call, line);
    return true;
  }
};

}  // namespace detail

namespace {

// NVML's handle of CUDA device `device` (see the header on why by PCI bus id).
nvml::Device find_device(const detail::NvmlSession& nvml, int device) {
  nvml::Device handle = nullptr;
  char bus_id[nvml::kPciBusIdLength] = {};
  const cudaError_t rc = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device);
  if (rc == cudaSuccess) {
    nvml.check(nvml.handle_by_pci_bus_id(bus_id, &handle),
               "nvmlDeviceGetHandleByPciBusId_v2(bus_id, &handle)", __LINE__);
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
  nvml.check(nvml.handle_by_index(static_cast<unsigned int>(device), &handle),
             "nvmlDeviceGetHandleByIndex_v2(device, &handle)", __LINE__);
  return handle;
}

}  // namespace

GpuTelemetry::GpuTelemetry(int device) {
  if (device < 0) {
    reason_ = "no GPU is bound to this rank (device index " + std::to_string(device) + ")";
    return;
  }
  try {
    nvml_ = std::make_unique<detail::NvmlSession>();
    device_ = find_device(*nvml_, device);
  } catch (const std::exception& e) {
    reason_ = e.what();
    device_ = nullptr;
    nvml_.reset();
  }
}

GpuTelemetry::~GpuTelemetry() = default;

GpuSample GpuTelemetry::sample() {
  GpuSample sample;
  if (device_ == nullptr) return sample;
  const detail::NvmlSession& nvml = *nvml_;
  try {
    nvml::Memory memory{};
    nvml.check(nvml.memory_info(device_, &memory), "nvmlDeviceGetMemoryInfo", __LINE__);
    nvml::Utilization utilization{};
    const bool has_utilization = nvml.supported(nvml.utilization_rates(device_, &utilization),
                                                "nvmlDeviceGetUtilizationRates", __LINE__);
    unsigned int milliwatts = 0;
    const bool has_power =
        nvml.supported(nvml.power_usage(device_, &milliwatts), "nvmlDeviceGetPowerUsage", __LINE__);
    unsigned int celsius = 0;
    const bool has_temperature =
        nvml.supported(nvml.temperature(device_, nvml::kTemperatureGpu, &celsius),
                       "nvmlDeviceGetTemperature", __LINE__);

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

namespace detail {
struct NvmlSession {};  // never made: there is no GPU to ask about
}  // namespace detail

GpuTelemetry::GpuTelemetry(int /*device*/) : reason_("built without CUDA") {}
GpuTelemetry::~GpuTelemetry() = default;
GpuSample GpuTelemetry::sample() { return GpuSample{}; }

}  // namespace trellis

#endif  // TRELLIS_ENABLE_CUDA
