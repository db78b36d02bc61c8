# Kokkos and KokkosKernels as trellis::kokkos and trellis::kokkoskernels.
#
# A standalone Kokkos (>= 3.4, Spack, modules, Kokkos_ROOT) exports Kokkos::kokkos and
# Kokkos::kokkoskernels and is used as is. Debian's libtrilinos-kokkos-dev ships the TriBITS
# packaging of Trilinos 13: its targets are trilinos_kokkoscore / trilinos_kokkoskernels and
# carry no include directory (headers live in /usr/include/trilinos; its Kokkos::kokkos points
# at a missing <prefix>/include), so we build our own targets from the trilinos_* ones.
find_package(Kokkos 3.4 REQUIRED CONFIG)
# What Kokkos itself is, before KokkosKernels' config runs: Trilinos' KokkosKernels config loads
# Trilinos' Kokkos targets, and a standalone one overwrites Kokkos_ENABLE_CUDA with the value
# of the Kokkos it was built against.
if(TARGET trilinos_kokkoscore)
  set(trellis_kokkos_packaging Trilinos)
else()
  set(trellis_kokkos_packaging standalone)
endif()
set(trellis_kokkos_has_cuda OFF)
if("CUDA" IN_LIST Kokkos_DEVICES OR Kokkos_ENABLE_CUDA)
  set(trellis_kokkos_has_cuda ON)
endif()
find_package(KokkosKernels REQUIRED CONFIG)
include(TrellisKokkosPairing)
trellis_check_kokkos_pairing()

add_library(trellis::kokkos INTERFACE IMPORTED)
add_library(trellis::kokkoskernels INTERFACE IMPORTED)

# Checked first: Debian also defines a Kokkos::kokkos whose include dir does not exist.
if(TARGET trilinos_kokkoscore)
  find_path(TRELLIS_KOKKOS_INCLUDE_DIR KokkosCore_config.h
            HINTS ${Kokkos_INCLUDE_DIRS} PATH_SUFFIXES trilinos REQUIRED)
  find_path(TRELLIS_KOKKOSKERNELS_INCLUDE_DIR KokkosKernels_config.h
            HINTS ${KokkosKernels_INCLUDE_DIRS} ${TRELLIS_KOKKOS_INCLUDE_DIR}
            PATH_SUFFIXES trilinos REQUIRED)
  target_include_directories(trellis::kokkos SYSTEM INTERFACE ${TRELLIS_KOKKOS_INCLUDE_DIR})
  target_link_libraries(trellis::kokkos INTERFACE trilinos_kokkoscore trilinos_kokkoscontainers)
  target_include_directories(trellis::kokkoskernels SYSTEM INTERFACE
                             ${TRELLIS_KOKKOSKERNELS_INCLUDE_DIR})
  target_link_libraries(trellis::kokkoskernels INTERFACE trilinos_kokkoskernels trellis::kokkos)
  message(STATUS "Kokkos ${Kokkos_VERSION} (Trilinos packaging, shimmed), devices: ${Kokkos_DEVICES}")
elseif(TARGET Kokkos::kokkos)
  target_link_libraries(trellis::kokkos INTERFACE Kokkos::kokkos)
  target_link_libraries(trellis::kokkoskernels INTERFACE Kokkos::kokkoskernels)
  message(STATUS "Kokkos ${Kokkos_VERSION} (standalone package), devices: ${Kokkos_DEVICES}")
else()
  message(FATAL_ERROR "Found Kokkos at '${Kokkos_DIR}' but it exports neither Kokkos::kokkos "
                      "nor trilinos_kokkoscore; set Kokkos_ROOT to a Kokkos >= 3.4 install.")
endif()

if(TRELLIS_PORTABLE_KERNELS)
  if(TRELLIS_ENABLE_CUDA)
    message(FATAL_ERROR "TRELLIS_PORTABLE_KERNELS is a host build; a CUDA build takes the "
                        "device code path already")
  endif()
  target_compile_definitions(trellis::kokkos INTERFACE TRELLIS_PORTABLE_KERNELS=1)
  message(STATUS "Portable kernels: the host runs every kernel's device body")
endif()
if(TRELLIS_ENABLE_CUDA AND NOT "CUDA" IN_LIST Kokkos_DEVICES)
  message(FATAL_ERROR "TRELLIS_ENABLE_CUDA=ON needs a Kokkos built with the CUDA backend "
                      "(found devices: ${Kokkos_DEVICES}). CUDA 13 needs Kokkos >= 4.7.")
endif()
