# One line per Catch2 tag of tests/mpi/*.cpp: the rank counts each runs at.
trellis_add_mpi_test(NAME data_mpi NP 1 2 4)
trellis_add_mpi_test(NAME grid_mpi NP 1 2 4)
trellis_add_mpi_test(NAME token_mpi NP 1 2 4)
trellis_add_mpi_test(NAME batchnorm_mpi NP 1 2 4)
trellis_add_mpi_test(NAME comm_mpi NP 1 2 4)
trellis_add_mpi_test(NAME dp_sync_mpi NP 1 2 4)
trellis_add_mpi_test(NAME tp_mpi NP 1 2 4)
trellis_add_mpi_test(NAME ckpt_mpi NP 1 2 4)
