// PowerSGD (Vogels et al., NeurIPS 2019): low-rank data-parallel gradient compression with
// error feedback, after PyTorch's powerSGD_hook (the reference algorithm). Per step, for each
// gradient matrix M [n, m] (a parameter of >= 2 dims viewed as [dim 0, rest], e.g. a conv
// weight as [C', C*k*k]) worth compressing at rank r, i.e. n*m >= min_compression (n + m) r:
//
//   M += E                      error feedback: what earlier steps' approximations left out
//   P = M Q                     [n, r]; Q [m, r] is last step's (warm start), or at the first
//                               step normal draws keyed by the parameter's name (same on every
//                               rank)
//   all-reduce P (sum); orthonormalise P's columns
//   Q = M^T P                   [m, r]; all-reduce Q (sum)
//   M' = P Q^T;  E = M - M' / dp;  M := M'
//
// Everything else (vectors, matrices too small to gain) is packed into the first all-reduce
// uncompressed. Sums, not means: Trellis pre-scales gradients so the dp sum is the global mean,
// and P, Q and M' are linear in the sum; each rank keeps its share M - M'/dp of the error, so
// the errors of the ranks add up to what M' left out of the sum (PyTorch's mean convention
// gives the same). Two all-reduces per step, of
//   sum_i (n_i + m_i) r + uncompressed
// floats, instead of the whole buffer. Buffers are allocated here; reduce() allocates nothing.
//
// State: Q and E per rank, kept across steps. Checkpoints hold each rank's state (state() /
// load_state()); a run resumed on the same layout continues bitwise, on another layout it
// restarts them (Q redrawn, E zero).
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/core/kokkos_types.hpp"
#include "trellis/kernels/views.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trellis {

struct PowerSgdOptions {
  int rank = 0;                  // parallel.powersgd_rank; 0 = off
  std::int64_t start_step = 0;   // parallel.powersgd_start_step: plain reduction before it
  double min_compression = 2.0;  // PyTorch's min_compression_rate
  std::uint64_t seed = 0;        // for Q's first draws
};

class PowerSgd {
 public:
  // store: finalized. dp and store must outlive this.
  PowerSgd(Communicator& dp, nn::ParameterStore& store, const PowerSgdOptions& options);

  // store.grads() := the (approximate) sum over dp of every rank's gradients. Collective.
  void reduce();

  std::size_t compressed_count() const { return items_.size(); }
  std::size_t compressed_elements() const { return compressed_elements_; }
  // Floats each rank contributes to the two all-reduces per step.
  std::size_t floats_per_step() const { return first_.extent(0) + q_.extent(0); }
  // This rank's error-feedback memory, the compressed matrices' E back to back (tests).
  const FloatView& error() const { return error_; }
  // The whole state, [q | error]: state_floats() floats.
  std::size_t state_floats() const { return q_.extent(0) + error_.extent(0); }
  void save_state(kernels::Vector out) const;  // out [>= state_floats()]
  void load_state(kernels::ConstVector in);    // in [>= state_floats()]

 private:
  struct Item {
    std::size_t offset = 0;           // in the flat gradient buffer
    int rows = 0, cols = 0;           // M [rows, cols]
    std::size_t p = 0, q = 0, e = 0;  // offsets in first_ (P), q_, error_
  };
  struct Run {  // uncompressed flat elements [begin, end), packed at `packed` in first_
    std::size_t begin = 0, end = 0, packed = 0;
  };

  Communicator& dp_;
  nn::ParameterStore& store_;
  int r_ = 0;
  std::vector<Item> items_;
  std::vector<Run> runs_;
  std::size_t compressed_elements_ = 0;
  FloatView first_;  // [sum n_i r + uncompressed]: every P, then the uncompressed gradients
  FloatView q_;      // [sum m_i r]
  FloatView error_;  // [sum n_i m_i]
};

}  // namespace trellis
