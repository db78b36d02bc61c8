# Finds every dependency the standard way (Kokkos_ROOT, HDF5_ROOT, ... on clusters) and
# exposes each as one trellis:: target, so the rest of the build never sees packaging quirks.
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(Boost 1.70 REQUIRED COMPONENTS program_options)
# JSON for the Hugging Face bridge (config.json, safetensors headers; train/hf): header-only
# (Debian: nlohmann-json3-dev), linked by the one layer that parses JSON.
find_package(nlohmann_json 3 REQUIRED)
# A host BLAS for host builds without oneDNN (sgemm_). CUDA builds run every GEMM on the device
# and link none: OpenBLAS alone would be a third of a bundle (docs/gpu-check.md).
if(NOT TRELLIS_ENABLE_CUDA)
  find_package(BLAS REQUIRED)
  add_library(trellis::blas INTERFACE IMPORTED)
  target_link_libraries(trellis::blas INTERFACE BLAS::BLAS)
  target_compile_definitions(trellis::blas INTERFACE TRELLIS_HOST_BLAS=1)
endif()

include(TrellisKokkos)

set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR
    "Trellis needs a parallel (MPI) HDF5, but the HDF5 found at '${HDF5_INCLUDE_DIRS}' is serial.\n"
    "On Debian/Ubuntu install libhdf5-openmpi-dev; on a cluster load the parallel HDF5 module "
    "or point HDF5_ROOT at a parallel build.")
endif()
add_library(trellis::hdf5 INTERFACE IMPORTED)
target_include_directories(trellis::hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(trellis::hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES} MPI::MPI_C)
target_compile_definitions(trellis::hdf5 INTERFACE ${HDF5_DEFINITIONS})

# oneDNN, the CPU counterpart of cuDNN/cuBLAS: host GEMMs and convolutions. Its package needs
# OpenCL's CMake files (Debian: ocl-icd-opencl-dev, only "recommended" by libdnnl-dev). Its
# package also names the threading runtime it was built with; with OpenMP (Debian's build)
# Trellis also links the OpenMP runtime so that it can hold each rank to one thread.
if(TRELLIS_ENABLE_ONEDNN AND TRELLIS_ENABLE_CUDA)
  message(FATAL_ERROR "TRELLIS_ENABLE_ONEDNN is for host builds; CUDA builds use cuBLAS/cuDNN")
endif()
if(TRELLIS_ENABLE_ONEDNN STREQUAL "AUTO")
  find_package(dnnl CONFIG QUIET)
  set(TRELLIS_ENABLE_ONEDNN ${dnnl_FOUND})
elseif(TRELLIS_ENABLE_ONEDNN)
  find_package(dnnl CONFIG REQUIRED)
endif()
if(TRELLIS_ENABLE_ONEDNN)
  add_library(trellis::onednn INTERFACE IMPORTED)
  target_link_libraries(trellis::onednn INTERFACE DNNL::dnnl)
  target_compile_definitions(trellis::onednn INTERFACE TRELLIS_HAVE_ONEDNN=1)
  if(DNNL_CPU_RUNTIME STREQUAL "OMP")
    find_package(OpenMP REQUIRED COMPONENTS CXX)
    target_link_libraries(trellis::onednn INTERFACE ${OpenMP_CXX_LIBRARIES})
    target_compile_definitions(trellis::onednn INTERFACE TRELLIS_ONEDNN_OPENMP=1)
  endif()
  message(STATUS "oneDNN ${dnnl_VERSION} (CPU runtime ${DNNL_CPU_RUNTIME})")
endif()

if(BUILD_TESTING OR NOT DEFINED BUILD_TESTING)
  find_package(Catch2 REQUIRED)
  if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
    set(TRELLIS_CATCH2_V3 ON)
  endif()
endif()

# CUDA builds compile every .cpp as CUDA through Kokkos' nvcc_wrapper (CMAKE_CXX_COMPILER), as
# Kokkos requires; Trellis has no .cu files, so the CUDA language is not enabled (it would only
# demand a second, separately configured compiler). The toolkit gives the runtime and cuBLAS.
if(TRELLIS_ENABLE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_library(trellis::cuda INTERFACE IMPORTED)
  target_link_libraries(trellis::cuda INTERFACE CUDA::cudart CUDA::cublas)
  # NVML (GPU telemetry) is not linked: src/train/monitoring/gpu_telemetry.cpp loads the driver's
  # libnvidia-ml.so.1 at run time, so neither nvml.h nor a link stub is needed to build.
endif()
if(TRELLIS_ENABLE_NCCL AND NOT TRELLIS_ENABLE_CUDA)
  message(FATAL_ERROR "TRELLIS_ENABLE_NCCL needs TRELLIS_ENABLE_CUDA=ON")
endif()
if(TRELLIS_ENABLE_CUDNN AND NOT TRELLIS_ENABLE_CUDA)
  message(FATAL_ERROR "TRELLIS_ENABLE_CUDNN needs TRELLIS_ENABLE_CUDA=ON")
endif()
# cuDNN ships no CMake package: find its header and library (CUDNN_ROOT, the CUDA toolkit, or
# the system paths where the Debian/NVIDIA packages put them).
if(TRELLIS_ENABLE_CUDNN)
  find_path(TRELLIS_CUDNN_INCLUDE_DIR cudnn.h
            HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT}
                  ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include include/x86_64-linux-gnu)
  find_library(TRELLIS_CUDNN_LIBRARY cudnn
               HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT}
                     ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  if(NOT TRELLIS_CUDNN_INCLUDE_DIR OR NOT TRELLIS_CUDNN_LIBRARY)
    message(FATAL_ERROR "TRELLIS_ENABLE_CUDNN=ON but cuDNN was not found (cudnn.h: "
                        "'${TRELLIS_CUDNN_INCLUDE_DIR}', libcudnn: '${TRELLIS_CUDNN_LIBRARY}'); "
                        "set CUDNN_ROOT to the cuDNN install.")
  endif()
  add_library(trellis::cudnn INTERFACE IMPORTED)
  target_include_directories(trellis::cudnn SYSTEM INTERFACE ${TRELLIS_CUDNN_INCLUDE_DIR})
  target_link_libraries(trellis::cudnn INTERFACE ${TRELLIS_CUDNN_LIBRARY} trellis::cuda)
  message(STATUS "cuDNN: ${TRELLIS_CUDNN_LIBRARY}")
endif()
# NCCL ships no CMake package either: find nccl.h and libnccl (NCCL_ROOT, the CUDA toolkit, or
# the system paths of the Debian/NVIDIA packages).
if(TRELLIS_ENABLE_NCCL)
  find_path(TRELLIS_NCCL_INCLUDE_DIR nccl.h
            HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT}
                  ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include include/x86_64-linux-gnu)
  find_library(TRELLIS_NCCL_LIBRARY nccl
               HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT}
                     ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  if(NOT TRELLIS_NCCL_INCLUDE_DIR OR NOT TRELLIS_NCCL_LIBRARY)
    message(FATAL_ERROR "TRELLIS_ENABLE_NCCL=ON but NCCL was not found (nccl.h: "
                        "'${TRELLIS_NCCL_INCLUDE_DIR}', libnccl: '${TRELLIS_NCCL_LIBRARY}'); "
                        "set NCCL_ROOT to the NCCL install.")
  endif()
  add_library(trellis::nccl INTERFACE IMPORTED)
  target_include_directories(trellis::nccl SYSTEM INTERFACE ${TRELLIS_NCCL_INCLUDE_DIR})
  target_link_libraries(trellis::nccl INTERFACE ${TRELLIS_NCCL_LIBRARY} trellis::cuda)
  message(STATUS "NCCL: ${TRELLIS_NCCL_LIBRARY}")
endif()
