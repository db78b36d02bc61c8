# One line per Catch2 tag of tests/mpi/*.cpp: the rank counts each runs at.
