#include "trellis/kernels/host_threads.hpp"

#include <cstdlib>

#if TRELLIS_ONEDNN_OPENMP
#include <omp.h>
#endif
#if TRELLIS_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace trellis::kernels {

int host_threads() {
#if TRELLIS_ONEDNN_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int configure_host_threads() {
#if TRELLIS_ONEDNN_OPENMP
  const char* requested = std::getenv("OMP_NUM_THREADS");
  if (requested == nullptr || *requested == '\0') omp_set_num_threads(1);
#endif
  return host_threads();
}

std::string host_gemm_description() {
#if TRELLIS_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " sgemm (" + std::to_string(host_threads()) +
         " thread(s), ISA chosen at run time)";
#else
  return "BLAS sgemm";
#endif
}

}  // namespace trellis::kernels
