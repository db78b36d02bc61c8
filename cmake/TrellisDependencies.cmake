# Finds every dependency the standard way (Kokkos_ROOT, HDF5_ROOT, ... on clusters) and
# exposes each as one trellis:: target, so the rest of the build never sees packaging quirks.
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(Boost 1.70 REQUIRED COMPONENTS program_options)
find_package(BLAS REQUIRED)

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

if(BUILD_TESTING OR NOT DEFINED BUILD_TESTING)
  find_package(Catch2 REQUIRED)
  if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
    set(TRELLIS_CATCH2_V3 ON)
  endif()
endif()

if(TRELLIS_ENABLE_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
if(TRELLIS_ENABLE_NCCL AND NOT TRELLIS_ENABLE_CUDA)
  message(FATAL_ERROR "TRELLIS_ENABLE_NCCL needs TRELLIS_ENABLE_CUDA=ON")
endif()
if(TRELLIS_ENABLE_CUDNN AND NOT TRELLIS_ENABLE_CUDA)
  message(FATAL_ERROR "TRELLIS_ENABLE_CUDNN needs TRELLIS_ENABLE_CUDA=ON")
endif()
