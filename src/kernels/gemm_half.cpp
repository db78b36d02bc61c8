#include "trellis/kernels/gemm_half.hpp"

#include "trellis/core/cpu_features.hpp"
#include "trellis/core/error.hpp"
#include "trellis/kernels/gemm.hpp"

#if TRELLIS_HAVE_ONEDNN
#include <dnnl.hpp>

#include <map>
#include <tuple>
#endif

#if defined(TRELLIS_ENABLE_CUDA)
#include <cublas_v2.h>
#endif

#include <string>

namespace trellis::kernels {

namespace {

std::string describe(const GemmOperand& o) {
  return std::string(o.is_half() ? precision_name(o.format) : "fp32") + " [" +
         std::to_string(o.rows) + ", " + std::to_string(o.cols) + "]";
}

#if TRELLIS_HAVE_ONEDNN
// One matmul primitive per (format, m, n, k, transposes, accumulate), created at its first use
// (a model meets a handful of shapes: micro-batch, evaluation batch, a last partial batch);
// its memory objects carry no buffer of their own, the call's pointers are set per call.
struct MatmulPlan {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
};

class OnednnMatmuls {
 public:
  void run(bool trans_a, bool trans_b, const GemmOperand& a, const GemmOperand& b, float beta,
           Matrix c) {
    const auto m = static_cast<dnnl::memory::dim>(c.extent(0));
    const auto n = static_cast<dnnl::memory::dim>(c.extent(1));
    const auto k = static_cast<dnnl::memory::dim>(trans_a ? a.rows : a.cols);
    const Key key{static_cast<int>(a.format), m, n, k, trans_a, trans_b, beta != 0.0f};
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, make_plan(key)).first;
    MatmulPlan& plan = it->second;
    plan.a.set_data_handle(const_cast<std::uint16_t*>(a.h16));  // oneDNN is not const-correct
    plan.b.set_data_handle(const_cast<std::uint16_t*>(b.h16));
    plan.c.set_data_handle(c.data());
    // The C API with a fixed argument array: the C++ execute() builds a map per call.
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, plan.a.get()},
                               {DNNL_ARG_WEIGHTS, plan.b.get()},
                               {DNNL_ARG_DST, plan.c.get()}};
    const dnnl_status_t status =
        dnnl_primitive_execute(plan.primitive.get(), stream_.get(), 3, args);
    if (status != dnnl_success)
      throw Error("oneDNN matmul failed with status " + std::to_string(static_cast<int>(status)) +
                  " for " + describe(a) + " x " + describe(b));
  }

 private:
  using Key =
      std::tuple<int, dnnl::memory::dim, dnnl::memory::dim, dnnl::memory::dim, bool, bool, bool>;

  MatmulPlan make_plan(const Key& key) {
    const auto [format, m, n, k, trans_a, trans_b, accumulate] = key;
    using dt = dnnl::memory::data_type;
    const dt half = static_cast<Precision>(format) == Precision::bf16 ? dt::bf16 : dt::f16;
    // Row-major buffers; a transposed operand is the same buffer read with swapped strides.
    const dnnl::memory::desc a_desc({m, k}, half,
                                    trans_a ? dnnl::memory::dims{1, m} : dnnl::memory::dims{k, 1});
    const dnnl::memory::desc b_desc({k, n}, half,
                                    trans_b ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1});
    const dnnl::memory::desc c_desc({m, n}, dt::f32, dnnl::memory::dims{n, 1});
    dnnl::primitive_attr attr;
    if (accumulate) {  // C += A B: the sum post-op reads the destination first
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), attr,
                                            engine_);
      MatmulPlan plan;
      plan.primitive = dnnl::matmul(pd);
      plan.a = dnnl::memory(a_desc, engine_, DNNL_MEMORY_NONE);
      plan.b = dnnl::memory(b_desc, engine_, DNNL_MEMORY_NONE);
      plan.c = dnnl::memory(c_desc, engine_, DNNL_MEMORY_NONE);
      return plan;
    } catch (const dnnl::error& e) {
      throw Error(std::string("oneDNN has no ") + precision_name(static_cast<Precision>(format)) +
                  " matmul on this CPU for [" + std::to_string(m) + ", " + std::to_string(k) +
                  "] x [" + std::to_string(k) + ", " + std::to_string(n) + "]: " + e.what());
    }
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<Key, MatmulPlan> plans_;
};

OnednnMatmuls& onednn_matmuls() {
  static thread_local OnednnMatmuls matmuls;  // the training thread's; created at first use
  return matmuls;
}
#endif

#if defined(TRELLIS_ENABLE_CUDA)
#define TRELLIS_CUBLAS(call)                                                                    \
  do {                                                                                          \
    const cublasStatus_t trellis_cublas_rc_ = (call);                                           \
    if (trellis_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::trellis::throw_call_failure("cuBLAS", #call, cublasGetStatusString(trellis_cublas_rc_), \
                                    __FILE__, __LINE__);                                        \
  } while (0)

// cuBLAS handle of this process, on Kokkos' stream (RAII; created at first use).
class CublasHandle {
 public:
  CublasHandle() {
    TRELLIS_CUBLAS(cublasCreate(&handle_));
    TRELLIS_CUBLAS(cublasSetStream(handle_, ExecSpace().cuda_stream()));
  }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same buffers with the
// operands swapped, no transposed copies.
void cublas_gemm(bool trans_a, bool trans_b, const GemmOperand& a, const GemmOperand& b, float beta,
                 Matrix c) {
  static CublasHandle handle;
  const cudaDataType_t type = a.format == Precision::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const auto m = static_cast<int>(c.extent(0)), n = static_cast<int>(c.extent(1));
  const auto k = static_cast<int>(trans_a ? a.rows : a.cols);
  const float alpha = 1.0f;
  TRELLIS_CUBLAS(cublasGemmEx(
      handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
      k, &alpha, b.h16, type, static_cast<int>(b.cols), a.h16, type, static_cast<int>(a.cols),
      &beta, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
#endif

#if TRELLIS_HAVE_ONEDNN
// Whether oneDNN has a bf16 matmul on this CPU: asked of oneDNN itself, once (it needs at
// least AVX-512 on x86: on an AVX2-only CPU it creates no bf16 primitive at all).
bool onednn_bf16_matmul_on_this_cpu() {
  static const bool available = [] {
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      using dt = dnnl::memory::data_type;
      const dnnl::memory::desc a({1, 1}, dt::bf16, dnnl::memory::dims{1, 1});
      const dnnl::memory::desc c({1, 1}, dt::f32, dnnl::memory::dims{1, 1});
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}
#endif

}  // namespace

std::string native_gemm_unavailable_reason(Precision format) {
  if (format == Precision::fp32) return "fp32 is not a 16-bit format";
#if defined(TRELLIS_ENABLE_CUDA)
  return "";
#elif TRELLIS_HAVE_ONEDNN
  if (format == Precision::fp16)
    return "this build has no native fp16 GEMM (host builds: oneDNN bf16 only)";
  if (!onednn_bf16_matmul_on_this_cpu())
    return "oneDNN has no bf16 matmul on this CPU (it needs AVX-512; cpu features: " +
           host_cpu_features().describe() + ")";
  return "";
#else
  return std::string("this build has no native ") + precision_name(format) +
         " GEMM (host builds: oneDNN bf16 only, and this one has no oneDNN)";
#endif
}

bool native_gemm_available(Precision format) {
  return native_gemm_unavailable_reason(format).empty();
}

void gemm(bool trans_a, bool trans_b, const GemmOperand& a, const GemmOperand& b, float beta,
          Matrix c) {
  if (!a.is_half() && !b.is_half()) {
    gemm(trans_a, trans_b, 1.0f, ConstMatrix(a.f32, a.rows, a.cols),
         ConstMatrix(b.f32, b.rows, b.cols), beta, c);
    return;
  }
  const std::size_t m = trans_a ? a.cols : a.rows, k = trans_a ? a.rows : a.cols;
  const std::size_t k_b = trans_b ? b.cols : b.rows, n = trans_b ? b.rows : b.cols;
  if (!a.is_half() || !b.is_half() || a.format != b.format || k != k_b || m != c.extent(0) ||
      n != c.extent(1))
    throw Error("gemm: operands do not fit: op(A) = " + std::string(trans_a ? "A^T" : "A") +
                " with A " + describe(a) + ", op(B) = " + (trans_b ? "B^T" : "B") + " with B " +
                describe(b) + ", C fp32 " + extents_string(c) +
                "; need both 16-bit of one format, op(A) [m, k], op(B) [k, n], C [m, n]");
  if (m == 0 || n == 0) return;
  if (!native_gemm_available(a.format))
    throw Error("gemm: no native " + std::string(precision_name(a.format)) +
                " GEMM here: " + native_gemm_unavailable_reason(a.format) +
                " (precision.kernels = emulated runs everywhere)");
#if defined(TRELLIS_ENABLE_CUDA)
  cublas_gemm(trans_a, trans_b, a, b, beta, c);
#elif TRELLIS_HAVE_ONEDNN
  if (k == 0) {  // an empty sum: C = beta C, which the sum post-op would not give
    gemm(trans_a, trans_b, 1.0f, ConstMatrix(nullptr, m, 0), ConstMatrix(nullptr, 0, n), beta, c);
    return;
  }
  onednn_matmuls().run(trans_a, trans_b, a, b, beta, c);
#endif
}

}  // namespace trellis::kernels
