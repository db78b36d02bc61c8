# Where the tests find what the machine provides: cache variables whose defaults are Debian 12's
# paths, passed to every test script through its environment (no script hard-codes a site path).
#
# TRELLIS_PYTHON: a python3 with numpy and h5py (and torch for the reference tools). Debian's
# /usr/bin/python3 is preferred over the first python3 on PATH, which on many machines is a
# pyenv/conda interpreter without those packages.
find_program(TRELLIS_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH
             DOC "python3 with numpy and h5py for the test scripts")
find_program(TRELLIS_PYTHON NAMES python3 DOC "python3 with numpy and h5py for the test scripts")
# tensorboard's python: the venv of tools/install-deps.sh (Debian's python is externally
# managed: no pip there). The TensorBoard tests skip (exit 77) when it cannot import
# tensorboard, unless TRELLIS_REQUIRE_TENSORBOARD=1 is in the environment (CI: .ci/run).
set(TRELLIS_PYTHON_TB /opt/trellis-venv/bin/python CACHE FILEPATH
    "python with the tensorboard package (made by tools/install-deps.sh)")
# A python with torch, transformers and safetensors for e2e.hf_transformers (the Hugging Face
# bridge against transformers itself; `tools/install-deps.sh --hf` makes it, `make test` runs
# that). The test checks at run time and is skipped (77) when that python lacks them; empty:
# the TRELLIS_HF_PYTHON of the environment ctest runs in, else TRELLIS_PYTHON.
set(TRELLIS_HF_PYTHON /opt/trellis-hf-venv/bin/python CACHE FILEPATH
    "python with torch, transformers and safetensors")
set(TRELLIS_FASHION_MNIST_DIR /usr/share/datasets/fashion-mnist CACHE PATH
    "Fashion-MNIST IDX files (*-ubyte.gz; Debian's dataset-fashion-mnist)")
set(TRELLIS_TEXT_CORPUS /usr/share/common-licenses/GPL-3 CACHE FILEPATH
    "a plain-text file the GPT tests tokenize (any few tens of KB of text)")
if(NOT TRELLIS_PYTHON)
  message(WARNING "No python3 found: the tools.* and e2e.* tests will fail; pass -DTRELLIS_PYTHON=")
endif()
# The environment every script test gets (a CMake list of NAME=VALUE).
set(TRELLIS_SITE_ENVIRONMENT
    "TRELLIS_PYTHON=${TRELLIS_PYTHON}" "TRELLIS_PYTHON_TB=${TRELLIS_PYTHON_TB}"
    "TRELLIS_FASHION_MNIST_DIR=${TRELLIS_FASHION_MNIST_DIR}"
    "TRELLIS_TEXT_CORPUS=${TRELLIS_TEXT_CORPUS}")

# trellis_add_mpi_test(NAME <catch-tag> NP <n...> [TIMEOUT s])
# Runs the MPI Catch2 executable restricted to one tag at each rank count, oversubscribed so
# that 4 ranks run on a 2-core CI box. Pass/fail is reduced over ranks inside the executable.
function(trellis_add_mpi_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "NP" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  foreach(np IN LISTS ARG_NP)
    add_test(NAME mpi.${ARG_NAME}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${TRELLIS_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${np}
                     $<TARGET_FILE:trellis_mpi_tests> "[${ARG_NAME}]")
    set_tests_properties(mpi.${ARG_NAME}.np${np} PROPERTIES
      TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${np}
      ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1;TRELLIS_TEST_DATA=${TRELLIS_TEST_DATA_DIR}")
  endforeach()
endfunction()

# trellis_add_e2e_test(NAME <name> SCRIPT <file> [TIMEOUT s] [PROCESSORS n])
# End-to-end shell scripts get the built binary, the source dir, mpiexec and the site paths
# above in their environment. PROCESSORS (default 2: most scripts launch 2 ranks or more) is
# what `ctest -j` reserves for the script, so that parallel tests never oversubscribe the cores.
function(trellis_add_e2e_test)
  cmake_parse_arguments(ARG "" "NAME;SCRIPT;TIMEOUT;PROCESSORS" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  if(NOT ARG_PROCESSORS)
    set(ARG_PROCESSORS 2)
  endif()
  add_test(NAME e2e.${ARG_NAME} COMMAND bash ${ARG_SCRIPT})
  set_tests_properties(e2e.${ARG_NAME} PROPERTIES TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${ARG_PROCESSORS}
    ENVIRONMENT "TRELLIS_BIN=$<TARGET_FILE:trellis>;TRELLIS_SRC=${PROJECT_SOURCE_DIR};MPIEXEC=${MPIEXEC_EXECUTABLE};MPIEXEC_FLAGS=${TRELLIS_MPIEXEC_FLAGS_STR};OPENBLAS_NUM_THREADS=1;TRELLIS_TEST_DATA=${TRELLIS_TEST_DATA_DIR};${TRELLIS_SITE_ENVIRONMENT}")
endfunction()
