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

# trellis_add_e2e_test(NAME <name> SCRIPT <file> [TIMEOUT s])
# End-to-end shell scripts get the built binary, the source dir and mpiexec in their environment.
function(trellis_add_e2e_test)
  cmake_parse_arguments(ARG "" "NAME;SCRIPT;TIMEOUT" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_test(NAME e2e.${ARG_NAME} COMMAND bash ${ARG_SCRIPT})
  set_tests_properties(e2e.${ARG_NAME} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "TRELLIS_BIN=$<TARGET_FILE:trellis>;TRELLIS_SRC=${PROJECT_SOURCE_DIR};MPIEXEC=${MPIEXEC_EXECUTABLE};MPIEXEC_FLAGS=${TRELLIS_MPIEXEC_FLAGS_STR};OPENBLAS_NUM_THREADS=1;TRELLIS_TEST_DATA=${TRELLIS_TEST_DATA_DIR}")
endfunction()
