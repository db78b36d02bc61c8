# Thin wrapper over tools/install-deps.sh, CMake and CTest. Configuration lives in CMake.
BUILD_DIR  ?= build
BUILD_TYPE ?= Release
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc)
DEMO_RANKS ?= 2
DATA_DIR   ?= data/fashion-mnist
TEXT_DIR   ?= data/austen
BPE_DIR    ?= data/austen-bpe
# The demos start their ranks through tools/launch (Ctrl-C stops with a checkpoint; it adds
# --allow-run-as-root as root and --oversubscribe with more ranks than cores); MPIRUN_FLAGS
# adds mpirun options.
MPIEXEC    ?= mpiexec
MPIRUN_FLAGS ?=
LAUNCH = MPIEXEC=$(MPIEXEC) MPIRUN_FLAGS="$(MPIRUN_FLAGS)" TRELLIS_BIN=$(BUILD_DIR)/trellis \
  tools/launch -n $(DEMO_RANKS)
# Site paths (Debian 12 defaults; ctest gets the same from CMake's TRELLIS_* cache variables).
# Debian's python3 has numpy and h5py; the first python3 on PATH may not.
PYTHON     ?= $(or $(wildcard /usr/bin/python3),python3)
FASHION_MNIST_SRC ?= /usr/share/datasets/fashion-mnist
# The tools' one Python environment (tools/install-deps.sh makes it; tools/trellis_env.py
# runs every tool in it): Debian's numpy, h5py, matplotlib and Pillow, and TensorBoard.
TRELLIS_VENV ?= /opt/trellis-venv
# The ranks cannot tell a terminal from a log (mpiexec gives them a pseudo-terminal either
# way), so the demos decide where the recipe's stdout really goes: a progress bar on a
# terminal, plain lines into `make demo > demo.log`. It must be the recipe's own shell that
# tests: $(shell ...) and $(...) would test the pipe they read from.
DEMO_PROGRESS = progress=lines; if test -t 1; then progress=bar; fi;

.PHONY: all deps deps-hf configure build build-portable bundle test demo demo-cnn demo-gpt demo-llama bench tensorboard container container-test clean

all: build

deps:
	tools/install-deps.sh

deps-hf:
	tools/install-deps.sh --hf

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The portable build (TRELLIS_PORTABLE_KERNELS): the host runs every kernel's device body, so
# the tests below execute the code a GPU build runs (no oneDNN there: CMAKE_ARGS' oneDNN
# switch is left out). Only what its tests need is built.
PORTABLE_BUILD_DIR ?= $(BUILD_DIR)-portable
PORTABLE_CMAKE_ARGS ?= $(filter-out -DTRELLIS_ENABLE_ONEDNN=%,$(CMAKE_ARGS))

build-portable: configure
	cmake -S . -B $(PORTABLE_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DTRELLIS_PORTABLE_KERNELS=ON $(PORTABLE_CMAKE_ARGS)
	cmake --build $(PORTABLE_BUILD_DIR) -j $(JOBS) --target trellis trellis_unit_tests trellis_mpi_tests

# Every test of the normal build, then the device-code-path tests of the portable build. The
# Hugging Face peers (PyTorch, transformers: tools/install-deps.sh --hf) come first, for
# e2e.hf_transformers. ctest -j runs tests side by side within the cores their PROCESSORS
# reserve (an MPI test its ranks, an end-to-end script 2 unless it runs one rank); the Slurm,
# container and timing tests run alone (RUN_SERIAL).
test: deps-hf build build-portable
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j $(JOBS)
	cd $(PORTABLE_BUILD_DIR) && ctest --output-on-failure --timeout 900 -j $(JOBS)

# One relocatable folder (binaries, test binaries, the libraries a compute node may lack, small
# data, tools/gpu_check.sh) to copy to a GPU node: see docs/gpu-check.md.
BUNDLE_DIR ?= $(BUILD_DIR)/bundle
bundle: build
	tools/make_bundle.sh $(BUILD_DIR) $(BUNDLE_DIR)

# TensorBoard over every run under runs/ (http://localhost:6006; RUNS=dir for another folder).
tensorboard: deps
	$(TRELLIS_VENV)/bin/tensorboard --logdir $(or $(RUNS),runs)

$(DATA_DIR)/train.h5 $(DATA_DIR)/test.h5:
	$(PYTHON) tools/idx_to_hdf5.py --src $(FASHION_MNIST_SRC) --out-dir $(DATA_DIR)

demo: build $(DATA_DIR)/train.h5
	$(DEMO_PROGRESS) $(LAUNCH) train --log.progress=$$progress --run.overwrite=true \
	  --config inputs/fashion_mlp.ini --data.train=$(DATA_DIR)/train.h5 --data.test=$(DATA_DIR)/test.h5

$(TEXT_DIR)/train.h5:
	tools/prepare_austen.sh $(TEXT_DIR)

# The CNN and GPT demos of inputs/fashion_cnn.ini and inputs/gpt_char.ini (minutes on 2 cores).
demo-cnn: build $(DATA_DIR)/train.h5
	$(DEMO_PROGRESS) $(LAUNCH) train --log.progress=$$progress --run.overwrite=true \
	  --config inputs/fashion_cnn.ini --data.train=$(DATA_DIR)/train.h5 --data.test=$(DATA_DIR)/test.h5

demo-gpt: build $(TEXT_DIR)/train.h5
	$(DEMO_PROGRESS) $(LAUNCH) train --log.progress=$$progress --run.overwrite=true \
	  --config inputs/gpt_char.ini --data.train=$(TEXT_DIR)/train.h5 --data.test=$(TEXT_DIR)/val.h5
	$(BUILD_DIR)/trellis generate --weights runs/gpt_char/model.h5 --prompt "It is a truth " \
	  --tokens 300 --top-k 10 --temperature 0.8 --seed 1

# A small Llama on Austen in BPE tokens (inputs/llama_austen.ini, minutes on 2 cores): bits per
# byte next to the byte-level GPT, the model exported for Hugging Face, text from both.
$(BPE_DIR)/train.h5:
	tools/prepare_austen.sh $(BPE_DIR) --bpe 4096

demo-llama: build $(BPE_DIR)/train.h5
	$(DEMO_PROGRESS) $(LAUNCH) train --log.progress=$$progress --run.overwrite=true \
	  --config inputs/llama_austen.ini --data.train=$(BPE_DIR)/train.h5 --data.test=$(BPE_DIR)/val.h5
	tools/demo_llama.sh $(BUILD_DIR) runs/llama_austen $(BPE_DIR)

# Trellis vs PyTorch side by side (tools/bench/run_bench.sh; BENCH_REPEATS repetitions).
BENCH_REPEATS ?= 3
bench: build $(DATA_DIR)/train.h5 $(TEXT_DIR)/train.h5
	tools/install-deps.sh --bench
	tools/bench/run_bench.sh $(BENCH_REPEATS)

# The container image (Containerfile, docs/containers.md), built with podman from a Debian 12
# base that mmdebstrap makes (no registry). container-test runs the end-to-end test of the image
# (the script ctest runs as e2e.container) on the demo's data.
CONTAINER_IMAGE ?= localhost/trellis:latest
container:
	tools/container/install-podman.sh
	tools/container/build_image.sh $(CONTAINER_IMAGE)

container-test: deps $(DATA_DIR)/train.h5
	tools/container/install-podman.sh
	TRELLIS_SRC=$(CURDIR) TRELLIS_BIN=$(BUILD_DIR)/trellis TRELLIS_TEST_DATA=$(abspath $(DATA_DIR)) \
	  TRELLIS_CONTAINER_DATA=$(abspath $(DATA_DIR)) TRELLIS_PYTHON=$(PYTHON) \
	  TRELLIS_FASHION_MNIST_DIR=$(FASHION_MNIST_SRC) TRELLIS_TEXT_CORPUS=/usr/share/common-licenses/GPL-3 \
	  bash tests/e2e/container/container_test.sh

clean:
	rm -rf $(BUILD_DIR)
