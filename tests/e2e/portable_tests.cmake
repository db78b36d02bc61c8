# The end-to-end scripts of the portable build: every layout against the single-rank run, so
# the device bodies of the kernels and the communicator exchange (not node shared memory) are
# checked through whole training runs.
set(E2E ${CMAKE_CURRENT_SOURCE_DIR}/e2e)
trellis_add_e2e_test(NAME prepare_data SCRIPT ${E2E}/prepare_data.sh TIMEOUT 300)
set_tests_properties(e2e.prepare_data PROPERTIES FIXTURES_SETUP fashion_data)
foreach(name dp_equivalence parallel_equivalence cnn_equivalence)
  trellis_add_e2e_test(NAME ${name} SCRIPT ${E2E}/${name}.sh)
  set_tests_properties(e2e.${name} PROPERTIES FIXTURES_REQUIRED fashion_data)
endforeach()
# Mixed precision through the device bodies: the GPT's and the Llama's curves (attention, the
# norms, the 16-bit activations and GEMM operands) and loss scaling with the 16-bit gradient
# wire.
# The MLP's and the CNN's 16-bit curves (4 minutes here) run in the normal build only: their
# kernels' device bodies are checked one by one by the unit tests above (the 16-bit epilogues
# with ReLU, the operand rounding) and the CNN's convolution path by cnn_equivalence.
set(PRECISION_E2E_SCRIPTS curves_gpt curves_llama loss_scaling_and_wire)
include(${E2E}/precision/tests.cmake)
trellis_add_e2e_test(NAME gpt_equivalence SCRIPT ${E2E}/gpt_equivalence.sh)
trellis_add_e2e_test(NAME llama_equivalence SCRIPT ${E2E}/llama_equivalence.sh)
# The memory ledger's state figures through the device bodies (byte masks in the optimizer
# and norm kernels).
trellis_add_e2e_test(NAME memory SCRIPT ${E2E}/memory/memory.sh)
# Recomputation through the device bodies: bitwise equal losses and parameters need every
# kernel's rerun to reproduce its first forward exactly.
trellis_add_e2e_test(NAME recompute SCRIPT ${E2E}/memory/recompute.sh)
# ZeRO-2/3 and sequence parallelism through the device bodies and the communicator exchange
# (gathers, reduce-scatters, the 16-bit wire, slots written by the device kernels).
trellis_add_e2e_test(NAME zero SCRIPT ${E2E}/memory/zero.sh)
trellis_add_e2e_test(NAME sequence_parallel SCRIPT ${E2E}/memory/sequence_parallel.sh)
