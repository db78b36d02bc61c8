# The library as one static target per architecture layer, bottom to top. The train layer is
# itself split into layers by concern (train/model ... train/commands), under the same rule:
# a folder includes only the folders listed before it. Each layer globs its
# own src/<layer>/**.cpp (a new file is picked up at the next build: CONFIGURE_DEPENDS), links
# only the layer below it (and so, transitively, every lower one), and compiles against an
# include root of its own: build/include-layers/<layer>/trellis/ holds symlinks to its own and
# the lower layers' header folders only, so an upward #include is a "No such file" error at
# compile time, not a review comment. trellis_lib aggregates all layers for main() and tests.
set(TRELLIS_LAYERS core kernels comm data nn int8 parallel optim
    train/model train/config train/files train/hf train/input train/faults train/monitoring
    train/plan train/loop train/commands)
set(TRELLIS_LAYER_INCLUDE_ROOT ${CMAKE_BINARY_DIR}/include-layers)

# Everything every layer needs: third-party targets and the build-wide definitions (they must
# be the same in every translation unit, or inline functions would differ between layers).
add_library(trellis_deps INTERFACE)
target_link_libraries(trellis_deps INTERFACE trellis::kokkos trellis::kokkoskernels MPI::MPI_CXX
                                             trellis::hdf5 Boost::program_options
                                             Threads::Threads ${CMAKE_DL_LIBS})
if(TARGET trellis::blas)
  target_link_libraries(trellis_deps INTERFACE trellis::blas)
endif()
if(TRELLIS_ENABLE_CUDA)
  target_link_libraries(trellis_deps INTERFACE trellis::cuda)
endif()
if(TRELLIS_ENABLE_CUDNN)
  target_link_libraries(trellis_deps INTERFACE trellis::cudnn)
endif()
if(TRELLIS_ENABLE_NCCL)
  target_link_libraries(trellis_deps INTERFACE trellis::nccl)
endif()
if(TRELLIS_ENABLE_ONEDNN)
  target_link_libraries(trellis_deps INTERFACE trellis::onednn)
endif()
target_compile_definitions(trellis_deps INTERFACE
  TRELLIS_VERSION="${PROJECT_VERSION}"
  $<$<BOOL:${TRELLIS_ENABLE_CUDA}>:TRELLIS_ENABLE_CUDA=1>
  $<$<BOOL:${TRELLIS_ENABLE_NCCL}>:TRELLIS_ENABLE_NCCL=1>
  $<$<BOOL:${TRELLIS_ENABLE_CUDNN}>:TRELLIS_ENABLE_CUDNN=1>)

set(below "")
# The host kernels' loops clamp with comparisons (core/fast_math.hpp's exp and erf, softmax
# masks); GCC if-converts, and so vectorises, such loops only when it may assume floating-point
# operations do not trap (measured: the GELU backward ran scalar in every clone without it).
# No value changes: IEEE results and their order stay as written (Clang's default already).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-fno-trapping-math)  # the layers below, the executable, the tests
endif()

foreach(layer IN LISTS TRELLIS_LAYERS)
  # The include root: <root>/<layer>/trellis/{this layer, every lower layer} -> source headers.
  string(REPLACE "/" "_" target ${layer})  # train/loop -> trellis_train_loop
  set(root ${TRELLIS_LAYER_INCLUDE_ROOT}/${target})
  # Made anew at each configure: a link left from an earlier layer order would let an upward
  # include through. (REMOVE_RECURSE removes the links, not what they point to.)
  file(REMOVE_RECURSE ${root})
  foreach(visible IN LISTS below ITEMS ${layer})
    get_filename_component(parent ${root}/trellis/${visible} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/trellis/${visible} ${root}/trellis/${visible}
         SYMBOLIC)
  endforeach()

  # A layer's folder may hold subfolders by concern (kernels/attention); no layer lies inside
  # another, so a recursive glob takes exactly the layer's own files.
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${layer}/*.cpp)
  add_library(trellis_${target} STATIC ${sources})
  target_include_directories(trellis_${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  if(below)
    target_link_libraries(trellis_${target} PUBLIC trellis_${previous})
  else()
    target_link_libraries(trellis_${target} PUBLIC trellis_deps)
  endif()
  trellis_set_warnings(trellis_${target})
  list(APPEND below ${layer})
  set(previous ${target})
endforeach()

# The Hugging Face bridge reads and writes JSON (config.json, safetensors headers); the layers
# above see the library through it, but none of their headers need it.
target_link_libraries(trellis_train_hf PUBLIC nlohmann_json::nlohmann_json)

# The optimizers' per-element square roots vectorise only without errno semantics (see
# src/optim/host_loops.hpp); GCC ignores no-math-errno in optimize attributes and pragmas.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties(src/optim/adam.cpp src/optim/rmsprop.cpp PROPERTIES
                              COMPILE_OPTIONS -fno-math-errno)
endif()

string(REPLACE ";" " " TRELLIS_BLAS_STRING "${BLAS_LIBRARIES}")
if(NOT TARGET trellis::blas)
  set(TRELLIS_BLAS_STRING "none (CUDA build: GEMMs on the device)")
endif()
set_source_files_properties(src/train/monitoring/build_info.cpp PROPERTIES COMPILE_DEFINITIONS
  "TRELLIS_COMPILER=\"${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}\";TRELLIS_BLAS=\"${TRELLIS_BLAS_STRING}\";TRELLIS_BUILD_TYPE=\"${CMAKE_BUILD_TYPE}\"")

# Everything but main(): what the executable and the tests link (the top layer sees all).
add_library(trellis_lib INTERFACE)
target_link_libraries(trellis_lib INTERFACE trellis_${previous})
