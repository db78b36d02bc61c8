# trellis_check_kokkos_pairing(): refuses a Kokkos Kernels that was not built against the
# Kokkos found. The classic trip: Kokkos_ROOT names a standalone (CUDA) Kokkos but
# KokkosKernels_ROOT is not given, so CMake finds Debian's Trilinos Kokkos Kernels, whose
# config silently loads Trilinos' own Kokkos 3.4 (Serial): the build then fails much later
# with "namespace Kokkos has no member Cuda". Called from TrellisKokkos.cmake, after both
# find_package calls, with trellis_kokkos_packaging and trellis_kokkos_has_cuda set from what
# Kokkos' own config said.
function(trellis_check_kokkos_pairing)
  string(CONCAT fix "Pass -DKokkosKernels_ROOT=<the Kokkos Kernels install built against the "
         "Kokkos at '${Kokkos_DIR}'> (and -DKokkos_ROOT=<that Kokkos>); left as is, the build "
         "fails with misleading errors such as \"namespace Kokkos has no member Cuda\". See "
         "docs/building.md.")
  if(TARGET trilinos_kokkoskernels)
    set(kernels_packaging Trilinos)
  else()
    set(kernels_packaging standalone)
  endif()
  if(NOT trellis_kokkos_packaging STREQUAL kernels_packaging)
    message(FATAL_ERROR
      "Kokkos and Kokkos Kernels do not belong together: Kokkos at '${Kokkos_DIR}' is a "
      "${trellis_kokkos_packaging} package, but the Kokkos Kernels found at "
      "'${KokkosKernels_DIR}' is a ${kernels_packaging} package (built against another "
      "Kokkos). ${fix}")
  endif()
  if(kernels_packaging STREQUAL Trilinos)
    return()  # one Trilinos install: its packages were built together
  endif()

  # A standalone Kokkos Kernels config records the Kokkos it was built against:
  # find_dependency(Kokkos HINTS <Kokkos_DIR at its build>) and Kokkos_ENABLE_CUDA.
  set(kernels_kokkos_dir "")
  set(kernels_config ${KokkosKernels_DIR}/KokkosKernelsConfig.cmake)
  if(EXISTS ${kernels_config})
    file(STRINGS ${kernels_config} line REGEX "find_dependency\\(Kokkos .*HINTS")
    if(line MATCHES "HINTS +\"?([^ \")]+)")
      set(kernels_kokkos_dir ${CMAKE_MATCH_1})
    endif()
  endif()
  set(kernels_kokkos_has_cuda ${trellis_kokkos_has_cuda})
  if(DEFINED Kokkos_ENABLE_CUDA AND NOT Kokkos_ENABLE_CUDA STREQUAL "")
    set(kernels_kokkos_has_cuda OFF)
    if(Kokkos_ENABLE_CUDA)
      set(kernels_kokkos_has_cuda ON)
    endif()
  endif()
  if(NOT kernels_kokkos_has_cuda STREQUAL trellis_kokkos_has_cuda)
    message(FATAL_ERROR
      "The Kokkos Kernels at '${KokkosKernels_DIR}' was built against a Kokkos with CUDA "
      "${kernels_kokkos_has_cuda}, but the Kokkos at '${Kokkos_DIR}' has CUDA "
      "${trellis_kokkos_has_cuda}. ${fix}")
  endif()
  if(trellis_kokkos_has_cuda AND kernels_kokkos_dir AND EXISTS ${kernels_kokkos_dir})
    file(REAL_PATH ${kernels_kokkos_dir} built_against)
    file(REAL_PATH ${Kokkos_DIR} found)
    if(NOT built_against STREQUAL found)
      message(FATAL_ERROR
        "The Kokkos Kernels at '${KokkosKernels_DIR}' was built against the Kokkos at "
        "'${built_against}', but the Kokkos found is '${found}' (a CUDA Kokkos: mixing two "
        "fails to compile or link). ${fix}")
    endif()
  endif()
endfunction()
