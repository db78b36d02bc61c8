# The Spack recipe of Trellis. packaging/spack/ is a Spack package repository (repo.yaml, with
# the packages right under it); how to add it and build is in packaging/spack/README.md.
#
# Written against Spack's Package API v1 (`from spack.package import *`), which Spack 0.23 and
# every Spack 1.x read: for API v1 repositories Spack 1.x provides CMakePackage and CudaPackage
# from its builtin repository by itself.

import os

import spack.builder
from spack.package import *

try:  # Spack 1.x
    from spack.package import tty
except ImportError:  # Spack 0.23
    from llnl.util import tty


class Trellis(CMakePackage, CudaPackage):
    """Trellis trains neural networks on HPC clusters: one C++17 SPMD executable (MPI + Kokkos,
    CUDA or CPU back-ends) with data, tensor and pipeline parallelism over MPI or NCCL and
    parallel HDF5 input."""

    # Placeholders: ".invalid" never resolves (RFC 2606). A site that hosts Trellis on its own
    # git server sets the real URL once in packages.yaml (packages: trellis: package_attributes:
    # git: ...); developers build their own clone with `spack develop` (README.md).
    homepage = "https://git.invalid/trellis/trellis"
    git = "https://git.invalid/trellis/trellis.git"

    version("main", branch="main")

    # CudaPackage gives +cuda and cuda_arch. Kokkos compiles for one GPU architecture, so
    # cuda_arch takes one value here, as in the kokkos package itself.
    variant(
        "cuda_arch",
        description="CUDA architecture of the GPUs (one value: Kokkos builds for one)",
        values=("none",) + CudaPackage.cuda_arch_values,
        default="none",
        multi=False,
        sticky=True,
        when="+cuda",
    )
    variant(
        "onednn",
        default=True,
        when="~cuda",
        description="Use oneDNN for the host GEMMs and convolutions (CPU builds)",
    )
    variant("nccl", default=False, when="+cuda", description="Build the NCCL communicator backend")
    variant("cudnn", default=False, when="+cuda", description="Use cuDNN for convolutions")

    conflicts(
        "cuda_arch=none",
        when="+cuda",
        msg="a CUDA build needs the GPUs' compute capability, e.g. cuda_arch=90 for H100",
    )
    # C++17 with std::filesystem in libstdc++ itself (GCC 8 needs -lstdc++fs, not linked).
    conflicts("%gcc@:8", msg="Trellis needs GCC 9 or newer (C++17 with std::filesystem)")
    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")

    depends_on("mpi")
    # Parallel HDF5: every rank reads its own samples. CI builds against 1.10; HDF5 2.x is
    # not tried yet.
    depends_on("hdf5@1.10:1 +mpi")
    depends_on("boost@1.70: +program_options")
    depends_on("nlohmann-json@3:")
    depends_on("catch2@2.13:", type="test")

    # Kokkos 3.4 to 4.x (Kokkos 5 requires C++20; Trellis is C++17) and the Kokkos Kernels
    # built against it: the kokkos-kernels package pins its kokkos to its own version.
    depends_on("kokkos@3.4:4")
    depends_on("kokkos-kernels@3.4:4")

    # CPU builds: a host BLAS (sgemm_), and oneDNN's v2 API (matmul::desc and the convolution
    # descs, removed in oneDNN 3.0).
    depends_on("blas", when="~cuda")
    depends_on("onednn@2", when="+onednn")
    depends_on("kokkos~cuda", when="~cuda")
    depends_on("kokkos-kernels~cuda", when="~cuda")

    # CUDA builds: every .cpp compiled through Kokkos' nvcc_wrapper with extended lambdas,
    # GEMMs on cuBLAS through Kokkos Kernels' cuBLAS TPL (and cublasGemmEx directly).
    with when("+cuda"):
        depends_on("cuda@11:")
        depends_on("kokkos+cuda+cuda_lambda+wrapper")
        depends_on("kokkos-kernels+cuda+cublas")
        depends_on("nccl@2.10:", when="+nccl")  # ncclBfloat16
        depends_on("cudnn@8:", when="+cudnn")
        for arch in CudaPackage.cuda_arch_values:
            depends_on(f"kokkos cuda_arch={arch}", when=f"cuda_arch={arch}")
            depends_on(f"kokkos-kernels cuda_arch={arch}", when=f"cuda_arch={arch}")
            depends_on(f"nccl cuda_arch={arch}", when=f"+nccl cuda_arch={arch}")

    # CMakeLists.txt installs bin/trellis and share/trellis/{inputs,slurm}.
    sanity_check_is_file = [join_path("bin", "trellis")]

    def _kokkos_cxx(self):
        """The C++ compiler of a CUDA build: Kokkos' nvcc_wrapper."""
        kokkos = self.spec["kokkos"]
        # Spack 1.x: a property of the kokkos package; earlier Spack: set on the kokkos spec
        # by its setup_dependent_package.
        cxx = getattr(kokkos.package, "kokkos_cxx", None) or getattr(kokkos, "kokkos_cxx", None)
        return cxx or join_path(self.spec["kokkos-nvcc-wrapper"].prefix.bin, "nvcc_wrapper")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("TRELLIS_ENABLE_CUDA", "cuda"),
            self.define("TRELLIS_ENABLE_NCCL", spec.satisfies("+nccl")),
            self.define("TRELLIS_ENABLE_CUDNN", spec.satisfies("+cudnn")),
            # ON or OFF, never the default AUTO: the oneDNN of the spec or none, not one that
            # CMake happens to find on the system.
            self.define("TRELLIS_ENABLE_ONEDNN", "ON" if spec.satisfies("+onednn") else "OFF"),
            # Spack does not set it: the tests (and Catch2) only with --test.
            self.define("BUILD_TESTING", self.run_tests),
            # The Kokkos Kernels must be the one built against this Kokkos (configure checks).
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
            self.define("HDF5_ROOT", spec["hdf5"].prefix),
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
        ]
        if spec.satisfies("+cuda"):
            args.extend(
                [
                    self.define("CMAKE_CXX_COMPILER", self._kokkos_cxx()),
                    self.define("CUDAToolkit_ROOT", spec["cuda"].prefix),
                ]
            )
        else:
            args.append(self.define("BLAS_LIBRARIES", spec["blas"].libs.joined(";")))
        if spec.satisfies("+onednn"):
            args.append(self.define("dnnl_ROOT", spec["onednn"].prefix))
        if spec.satisfies("+nccl"):
            args.append(self.define("NCCL_ROOT", spec["nccl"].prefix))
        if spec.satisfies("+cudnn"):
            args.append(self.define("CUDNN_ROOT", spec["cudnn"].prefix))
        return args

    def _build_directory(self):
        try:  # in phases and run_after callbacks: the builder's, forwarded
            return self.build_directory
        except AttributeError:  # check() is called on the package itself: ask its builder
            return spack.builder.create(self).build_directory

    def check(self):
        """`spack install --test=root`: the serial unit tests (ctest's `unit`). The other
        tests need site data and Open MPI's mpirun flags (tests/CMakeLists.txt)."""
        if self.spec.satisfies("+cuda"):
            tty.warn(
                "trellis: the unit tests of a CUDA build need a GPU; not run here "
                "(run tests/trellis_unit_tests of the build directory on a GPU node)"
            )
            return
        with working_dir(self._build_directory()):
            ctest("--output-on-failure", "-R", "^unit$")

    def test_version(self):
        """`spack test run trellis`: the installed executable starts and prints its version"""
        trellis = which(join_path(self.prefix.bin, "trellis"))
        out = trellis("--version", output=str.split, error=str.split)
        assert out.startswith("trellis "), out
