# End-to-end scripts (bash), run by ctest with TRELLIS_BIN, TRELLIS_SRC, MPIEXEC set.
set(E2E ${CMAKE_CURRENT_SOURCE_DIR}/e2e)
trellis_add_e2e_test(NAME prepare_data SCRIPT ${E2E}/prepare_data.sh TIMEOUT 300)
set_tests_properties(e2e.prepare_data PROPERTIES FIXTURES_SETUP fashion_data)
foreach(name dp_equivalence config_errors fashion_mlp_accuracy parallel_equivalence
             checkpoint_resume fault_handling monitoring mpirun_signals input_pipeline
             pruning quantization disk_full run_directory run_length
             interrupt launcher trace)
  trellis_add_e2e_test(NAME ${name} SCRIPT ${E2E}/${name}.sh)
  set_tests_properties(e2e.${name} PROPERTIES FIXTURES_REQUIRED fashion_data)
endforeach()
# monitoring exits 77 (skipped) when only its TensorBoard read-back could not run: no
# tensorboard package, and TRELLIS_REQUIRE_TENSORBOARD is not 1 (CI sets it).
set_tests_properties(e2e.monitoring PROPERTIES SKIP_RETURN_CODE 77)
# disk_full mounts a small tmpfs in a private mount namespace: root only, 77 otherwise.
set_tests_properties(e2e.disk_full PROPERTIES SKIP_RETURN_CODE 77)
include(${E2E}/precision/tests.cmake)
trellis_add_e2e_test(NAME gpt_equivalence SCRIPT ${E2E}/gpt_equivalence.sh)
trellis_add_e2e_test(NAME llama_equivalence SCRIPT ${E2E}/llama_equivalence.sh)
trellis_add_e2e_test(NAME memory SCRIPT ${E2E}/memory/memory.sh)
trellis_add_e2e_test(NAME recompute SCRIPT ${E2E}/memory/recompute.sh)
trellis_add_e2e_test(NAME zero SCRIPT ${E2E}/memory/zero.sh)
trellis_add_e2e_test(NAME sequence_parallel SCRIPT ${E2E}/memory/sequence_parallel.sh)
trellis_add_e2e_test(NAME sharded_inference SCRIPT ${E2E}/memory/sharded_inference.sh)
trellis_add_e2e_test(NAME bpe_generate SCRIPT ${E2E}/bpe_generate.sh)
# trellis plan: the command on the shipped clusters, and its predictions against measured runs.
trellis_add_e2e_test(NAME plan_cli SCRIPT ${E2E}/plan/plan_cli.sh)
trellis_add_e2e_test(NAME plan_validation SCRIPT ${E2E}/plan/plan_validation.sh)
# It compares predicted step times with measured ones: nothing may run beside it.
set_tests_properties(e2e.plan_validation PROPERTIES RUN_SERIAL TRUE)
# The Hugging Face bridge: init.weights on every layout (no transformers needed), and the
# comparison with transformers, which exits 77 (skipped) when its Python (TRELLIS_HF_PYTHON,
# else TRELLIS_PYTHON) cannot import torch, transformers and safetensors.
trellis_add_e2e_test(NAME init_weights SCRIPT ${E2E}/hf/init_weights.sh)
trellis_add_e2e_test(NAME hf_transformers SCRIPT ${E2E}/hf/hf_transformers.sh TIMEOUT 900)
set_tests_properties(e2e.hf_transformers PROPERTIES SKIP_RETURN_CODE 77)
# 50 AdamW steps from the same weights in Trellis and PyTorch: the same loss at every step.
trellis_add_e2e_test(NAME torch_training SCRIPT ${E2E}/hf/torch_training.sh)
set_tests_properties(e2e.torch_training PROPERTIES SKIP_RETURN_CODE 77)
if(TRELLIS_HF_PYTHON)
  set_property(TEST e2e.hf_transformers e2e.torch_training APPEND PROPERTY ENVIRONMENT
               "TRELLIS_HF_PYTHON=${TRELLIS_HF_PYTHON}")
endif()
trellis_add_e2e_test(NAME cnn_equivalence SCRIPT ${E2E}/cnn_equivalence.sh)
set_tests_properties(e2e.cnn_equivalence PROPERTIES FIXTURES_REQUIRED fashion_data)
# A one-node Slurm cluster on localhost (tests/cluster/cluster.sh; needs root, exits 77 otherwise):
# train.sbatch, and preemptible.sbatch signalled mid-run, requeued and resumed. Fixed ports:
# it runs alone.
trellis_add_e2e_test(NAME slurm_cluster SCRIPT ${E2E}/slurm/slurm_cluster.sh TIMEOUT 900)
set_tests_properties(e2e.slurm_cluster PROPERTIES FIXTURES_REQUIRED fashion_data RUN_SERIAL TRUE
  SKIP_RETURN_CODE 77)
# Several nodes in network namespaces on this machine (tests/cluster/testcluster.sh; needs root, exits
# 77 otherwise): multinode.sbatch across nodes, placement warnings, per-node staging, listeners.
trellis_add_e2e_test(NAME slurm_multinode SCRIPT ${E2E}/slurm/slurm_multinode.sh TIMEOUT 900)
set_tests_properties(e2e.slurm_multinode PROPERTIES FIXTURES_REQUIRED fashion_data
  RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
# Nodes of that cluster killed mid-step and mid-checkpoint: survivors name the lost ranks,
# Slurm requeues, the job resumes on the nodes left, the last on another layout.
trellis_add_e2e_test(NAME slurm_node_loss SCRIPT ${E2E}/slurm/slurm_node_loss.sh TIMEOUT 900)
set_tests_properties(e2e.slurm_node_loss PROPERTIES FIXTURES_REQUIRED fashion_data
  RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
# That cluster's cloud partition elastic (--elastic): jobs power its nodes up, idle nodes power
# down, a failed resume is marked down and requeued, a preempted burst job resumes on prem;
# tools/cost_report's billed node-hours against the power log.
trellis_add_e2e_test(NAME slurm_elastic SCRIPT ${E2E}/slurm/slurm_elastic.sh TIMEOUT 900)
set_tests_properties(e2e.slurm_elastic PROPERTIES FIXTURES_REQUIRED fashion_data
  RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
# The container image (Containerfile) built with podman and run: trellis info, the demo under the
# image's mpirun, podman stop and resume in another container, bind-mount ownership. Exits 77
# (skipped) without podman and mmdebstrap (`make container-test` installs them), when not root
# or when podman cannot start a container; TRELLIS_CONTAINER_TEST=0 skips it, =1 makes those
# skips failures. Its first run compiles the image (5 minutes on 2 cores, a minute more to make
# the Debian base); with podman's layer cache, 15 s.
trellis_add_e2e_test(NAME container SCRIPT ${E2E}/container/container_test.sh TIMEOUT 1800)
set_tests_properties(e2e.container PROPERTIES FIXTURES_REQUIRED fashion_data RUN_SERIAL TRUE
  SKIP_RETURN_CODE 77)
