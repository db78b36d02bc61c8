# End-to-end scripts (bash), run by ctest with TRELLIS_BIN, TRELLIS_SRC, MPIEXEC set.
