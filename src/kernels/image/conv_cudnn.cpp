// cuDNN convolution (TRELLIS_ENABLE_CUDNN): see conv_cudnn.hpp.
#include "trellis/kernels/conv_cudnn.hpp"

#if defined(TRELLIS_ENABLE_CUDNN)

#include "trellis/core/error.hpp"

#include <cudnn.h>

#include <algorithm>
#include <cstddef>

namespace trellis::kernels {

// TRELLIS_CUDNN(call): throws trellis::Error naming the call and cuDNN's message on failure.
#define TRELLIS_CUDNN(call)                                                                 \
  do {                                                                                      \
    const cudnnStatus_t trellis_cudnn_rc_ = (call);                                         \
    if (trellis_cudnn_rc_ != CUDNN_STATUS_SUCCESS)                                          \
      ::trellis::throw_call_failure("cuDNN", #call, cudnnGetErrorString(trellis_cudnn_rc_), \
                                    __FILE__, __LINE__);                                    \
  } while (0)

namespace {

// One owner per cuDNN object: created in the constructor, destroyed (unchecked: destructors
// must not throw) in the destructor.
struct CudnnHandle {
  cudnnHandle_t h = nullptr;
  CudnnHandle() { TRELLIS_CUDNN(cudnnCreate(&h)); }
  ~CudnnHandle() { cudnnDestroy(h); }
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
};
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { TRELLIS_CUDNN(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { TRELLIS_CUDNN(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { TRELLIS_CUDNN(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

// The first (fastest) algorithm cuDNN's heuristics rank as usable, deterministic and of the
// math type asked for (FMA for fp32: no TF32; tensor cores for 16-bit operands).
template <class Perf, class Algo>
Algo pick_algorithm(const Perf* perf, int returned, cudnnMathType_t math, const std::string& what) {
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
        perf[i].mathType == math) {
      return perf[i].algo;
    }
  }
  throw Error(std::string("cuDNN offers no deterministic ") +
              (math == CUDNN_FMA_MATH ? "FMA-math" : "tensor-op") + " algorithm for " + what);
}

cudnnDataType_t data_type(Precision p) {
  switch (p) {
    case Precision::bf16:
      return CUDNN_DATA_BFLOAT16;
    case Precision::fp16:
      return CUDNN_DATA_HALF;
    case Precision::fp32:
      break;
  }
  return CUDNN_DATA_FLOAT;
}

}  // namespace

struct CudnnConvolution::State {
  ConvGeometry g;
  int out_channels = 0;
  int capacity = 0;
  Precision operands = Precision::fp32;
  // 16-bit operands only: [capacity * C*H*W] x, then dx; [capacity * C'*H'*W'] y, then dy;
  // [C' * C*k*k] the weight gradient of one call.
  HalfView x16, y16, dw16;
  int n = -1;  // batch the x/y descriptors are set for
  CudnnHandle handle;
  TensorDesc x_desc, y_desc;
  FilterDesc w_desc;
  ConvDesc conv_desc;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  Kokkos::View<unsigned char*, MemSpace> workspace;

  void set_batch(int batch) {
    if (batch == n) return;
    TRELLIS_CUDNN(cudnnSetTensor4dDescriptor(x_desc.d, CUDNN_TENSOR_NCHW, data_type(operands),
                                             batch, g.channels, g.height, g.width));
    TRELLIS_CUDNN(cudnnSetTensor4dDescriptor(y_desc.d, CUDNN_TENSOR_NCHW, data_type(operands),
                                             batch, out_channels, g.out_height(), g.out_width()));
    n = batch;
  }

  // Workspace the three algorithms need for the current batch.
  std::size_t workspace_bytes() const {
    std::size_t fwd = 0, bwd_data = 0, bwd_filter = 0;
    TRELLIS_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(handle.h, x_desc.d, w_desc.d, conv_desc.d,
                                                          y_desc.d, fwd_algo, &fwd));
    TRELLIS_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(
        handle.h, w_desc.d, y_desc.d, conv_desc.d, x_desc.d, bwd_data_algo, &bwd_data));
    TRELLIS_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        handle.h, x_desc.d, y_desc.d, conv_desc.d, w_desc.d, bwd_filter_algo, &bwd_filter));
    return std::max({fwd, bwd_data, bwd_filter});
  }

  // Sets the descriptors for `batch` images and checks the workspace made for `capacity`
  // covers it (cuDNN's needs grow with the batch; this guards the exception).
  void prepare(int batch) {
    TRELLIS_REQUIRE(batch > 0 && batch <= capacity, "cudnn conv: batch " + std::to_string(batch) +
                                                        " outside [1, capacity " +
                                                        std::to_string(capacity) + "]");
    set_batch(batch);
    const std::size_t need = workspace_bytes();
    TRELLIS_REQUIRE(need <= workspace.extent(0), "cudnn conv: batch " + std::to_string(batch) +
                                                     " needs " + std::to_string(need) +
                                                     " workspace bytes, have " +
                                                     std::to_string(workspace.extent(0)));
  }
};

CudnnConvolution::CudnnConvolution(const ConvGeometry& g, int out_channels, int capacity,
                                   Precision operands)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.g = g;
  s.out_channels = out_channels;
  s.capacity = capacity;
  s.operands = operands;
  TRELLIS_REQUIRE(capacity > 0, "cudnn conv: capacity must be positive");
  TRELLIS_CUDNN(cudnnSetStream(s.handle.h, ExecSpace().cuda_stream()));
  TRELLIS_CUDNN(cudnnSetFilter4dDescriptor(s.w_desc.d, data_type(operands), CUDNN_TENSOR_NCHW,
                                           out_channels, g.channels, g.kernel, g.kernel));
  // Arithmetic in fp32 whatever the operands (cuDNN's pseudo-16-bit configurations).
  TRELLIS_CUDNN(cudnnSetConvolution2dDescriptor(s.conv_desc.d, g.padding, g.padding, g.stride,
                                                g.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
  // fp32: FMA math, no TF32, so results match the im2col + GEMM path within fp32 rounding.
  const cudnnMathType_t math = operands == Precision::fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  TRELLIS_CUDNN(cudnnSetConvolutionMathType(s.conv_desc.d, math));
  s.set_batch(capacity);
  if (operands != Precision::fp32) {
    const auto cap = static_cast<std::size_t>(capacity);
    const auto cout = static_cast<std::size_t>(out_channels);
    s.x16 = HalfView("trellis::kernels::cudnn_conv.x16",
                     cap * static_cast<std::size_t>(g.image_size()));
    s.y16 = HalfView("trellis::kernels::cudnn_conv.y16",
                     cap * cout * static_cast<std::size_t>(g.col_cols()));
    s.dw16 = HalfView("trellis::kernels::cudnn_conv.dw16",
                      cout * static_cast<std::size_t>(g.col_rows()));
  }

  constexpr int kMaxAlgos = 16;
  int returned = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kMaxAlgos];
  TRELLIS_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(
      s.handle.h, s.x_desc.d, s.w_desc.d, s.conv_desc.d, s.y_desc.d, kMaxAlgos, &returned, fwd));
  s.fwd_algo = pick_algorithm<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      fwd, returned, math, "the forward convolution " + g.describe());
  cudnnConvolutionBwdDataAlgoPerf_t bwd_data[kMaxAlgos];
  TRELLIS_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(s.handle.h, s.w_desc.d, s.y_desc.d,
                                                            s.conv_desc.d, s.x_desc.d, kMaxAlgos,
                                                            &returned, bwd_data));
  s.bwd_data_algo =
      pick_algorithm<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
          bwd_data, returned, math, "the input gradient of " + g.describe());
  cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[kMaxAlgos];
  TRELLIS_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(s.handle.h, s.x_desc.d, s.y_desc.d,
                                                              s.conv_desc.d, s.w_desc.d, kMaxAlgos,
                                                              &returned, bwd_filter));
  s.bwd_filter_algo =
      pick_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
          bwd_filter, returned, math, "the weight gradient of " + g.describe());

  s.workspace = Kokkos::View<unsigned char*, MemSpace>(
      "trellis::kernels::cudnn_conv.workspace", std::max<std::size_t>(s.workspace_bytes(), 1));
}

CudnnConvolution::~CudnnConvolution() = default;

Precision CudnnConvolution::operands() const { return state_->operands; }

void CudnnConvolution::forward(ConstMatrix x, int n, ConstVector w, Matrix y) {
  State& s = *state_;
  TRELLIS_REQUIRE(s.operands == Precision::fp32, "cudnn conv: fp32 weights given");
  s.prepare(n);
  const float one = 1.0f, zero = 0.0f;
  TRELLIS_CUDNN(cudnnConvolutionForward(s.handle.h, &one, s.x_desc.d, x.data(), s.w_desc.d,
                                        w.data(), s.conv_desc.d, s.fwd_algo, s.workspace.data(),
                                        s.workspace.extent(0), &zero, s.y_desc.d, y.data()));
}

void CudnnConvolution::backward(ConstMatrix x, ConstMatrix dy, int n, ConstVector w, Vector dw,
                                Matrix dx) {
  State& s = *state_;
  TRELLIS_REQUIRE(s.operands == Precision::fp32, "cudnn conv: fp32 weights given");
  s.prepare(n);
  const float one = 1.0f, zero = 0.0f;
  // Parameter gradient accumulates (beta 1), input gradient is written (beta 0).
  TRELLIS_CUDNN(cudnnConvolutionBackwardFilter(
      s.handle.h, &one, s.x_desc.d, x.data(), s.y_desc.d, dy.data(), s.conv_desc.d,
      s.bwd_filter_algo, s.workspace.data(), s.workspace.extent(0), &one, s.w_desc.d, dw.data()));
  if (dx.data() == nullptr) return;  // the caller needs no input gradient
  TRELLIS_CUDNN(cudnnConvolutionBackwardData(
      s.handle.h, &one, s.w_desc.d, w.data(), s.y_desc.d, dy.data(), s.conv_desc.d, s.bwd_data_algo,
      s.workspace.data(), s.workspace.extent(0), &zero, s.x_desc.d, dx.data()));
}

namespace {

// The first `count` elements of a 16-bit buffer, and of an fp32 matrix's rows as a vector.
HalfVector leading(const HalfView& v, std::size_t count) { return HalfVector(v.data(), count); }
Vector flat(const Matrix& m, int rows) {
  return Vector(m.data(), static_cast<std::size_t>(rows) * m.extent(1));
}
ConstVector flat(const ConstMatrix& m, int rows) {
  return ConstVector(m.data(), static_cast<std::size_t>(rows) * m.extent(1));
}

}  // namespace

void CudnnConvolution::forward(ConstMatrix x, int n, ConstHalfVector w, Matrix y) {
  State& s = *state_;
  TRELLIS_REQUIRE(s.operands != Precision::fp32, "cudnn conv: 16-bit weights given");
  s.prepare(n);
  const ConstVector xs = flat(x, n);
  const Vector ys = flat(y, n);
  to_half(s.operands, xs, leading(s.x16, xs.extent(0)));
  const float one = 1.0f, zero = 0.0f;
  TRELLIS_CUDNN(cudnnConvolutionForward(s.handle.h, &one, s.x_desc.d, s.x16.data(), s.w_desc.d,
                                        w.data(), s.conv_desc.d, s.fwd_algo, s.workspace.data(),
                                        s.workspace.extent(0), &zero, s.y_desc.d, s.y16.data()));
  from_half(s.operands, leading(s.y16, ys.extent(0)), ys);
}

void CudnnConvolution::backward(ConstMatrix x, ConstMatrix dy, int n, ConstHalfVector w, Vector dw,
                                Matrix dx) {
  State& s = *state_;
  TRELLIS_REQUIRE(s.operands != Precision::fp32, "cudnn conv: 16-bit weights given");
  s.prepare(n);
  const ConstVector xs = flat(x, n), dys = flat(dy, n);
  // x again from the caller's fp32 x: correct whatever ran between forward and backward.
  to_half(s.operands, xs, leading(s.x16, xs.extent(0)));
  to_half(s.operands, dys, leading(s.y16, dys.extent(0)));
  const float one = 1.0f, zero = 0.0f;
  TRELLIS_CUDNN(cudnnConvolutionBackwardFilter(
      s.handle.h, &one, s.x_desc.d, s.x16.data(), s.y_desc.d, s.y16.data(), s.conv_desc.d,
      s.bwd_filter_algo, s.workspace.data(), s.workspace.extent(0), &zero, s.w_desc.d,
      s.dw16.data()));
  add_from_half(s.operands, s.dw16, dw);
  if (dx.data() == nullptr) return;  // the caller needs no input gradient
  // dx in 16 bits over x16 (read above, no longer needed), then widened.
  TRELLIS_CUDNN(cudnnConvolutionBackwardData(
      s.handle.h, &one, s.w_desc.d, w.data(), s.y_desc.d, s.y16.data(), s.conv_desc.d,
      s.bwd_data_algo, s.workspace.data(), s.workspace.extent(0), &zero, s.x_desc.d, s.x16.data()));
  const Vector dxs = flat(dx, n);
  from_half(s.operands, leading(s.x16, dxs.extent(0)), dxs);
}

}  // namespace trellis::kernels

#endif
