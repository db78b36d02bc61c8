# Thin wrapper over tools/install-deps.sh, CMake and CTest. Configuration lives in CMake.
BUILD_DIR  ?= build
BUILD_TYPE ?= Release
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc)
DEMO_RANKS ?= 2
DATA_DIR   ?= data/fashion-mnist
MPIEXEC    ?= mpiexec
MPIEXEC_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-run-as-root) --oversubscribe

.PHONY: all deps configure build test demo bench clean

all: build

deps:
	tools/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900

$(DATA_DIR)/train.h5 $(DATA_DIR)/test.h5:
	/usr/bin/python3 tools/idx_to_hdf5.py --src /usr/share/datasets/fashion-mnist --out-dir $(DATA_DIR)

demo: build $(DATA_DIR)/train.h5
	OPENBLAS_NUM_THREADS=1 $(MPIEXEC) $(MPIEXEC_FLAGS) -n $(DEMO_RANKS) $(BUILD_DIR)/trellis train \
	  --config inputs/fashion_mlp.ini --data.train=$(DATA_DIR)/train.h5 --data.test=$(DATA_DIR)/test.h5

bench: build $(DATA_DIR)/train.h5
	tools/bench_throughput.sh

clean:
	rm -rf $(BUILD_DIR)
