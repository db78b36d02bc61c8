// Softmax + cross-entropy when the classes (a vocabulary) are split over tensor-parallel
// ranks (Megatron's vocab_parallel_cross_entropy). Each rank holds logits [n, c] for classes
// [offset, offset + c) of C; the row statistics are combined with all-reduces between steps:
//
//   1. local row max                    -> all-reduce max  -> m_r
//   2. sum_j exp(z_j - m_r), and z_y if label y is local (else 0), and the first local j with
//      z_j == m_r as a global index (else C)    -> all-reduce sum, sum, min
//   3. loss_r = log(S_r) + m_r - z_y;  correct iff the global first argmax equals y
//   backward: dz_j = (exp(z_j - m_r) / S_r - [offset + j == y]) * scale
//
// The argmax index travels as a float: exact for vocabularies below 2^24.
#pragma once

#include "trellis/kernels/softmax_xent.hpp"
#include "trellis/kernels/views.hpp"

#include <cstdint>

namespace trellis::kernels {

// row_max [n] = max over this rank's classes of logits [n, c].
void vp_xent_row_max(ConstMatrix logits, Vector row_max);

// stats [3n]: [0, n) sum of exp(z - row_max), [n, 2n) the label's logit when local (else 0),
// [2n, 3n) the first local argmax as a global index when its value equals row_max (else C).
void vp_xent_row_stats(ConstMatrix logits, ConstLabels labels, ConstVector row_max,
                       std::int64_t offset, std::int64_t classes, Vector stats);

// With the reduced row_max and stats: loss sum and correct rows. A label outside
// [0, classes) throws InputError naming it and its row. Synchronous (host result).
XentResult vp_xent_result(ConstLabels labels, ConstVector row_max, ConstVector stats,
                          std::int64_t classes);

// dlogits [n, c] (=), from the reduced row_max and sums (stats [0, n)).
void vp_xent_backward(ConstMatrix logits, ConstLabels labels, ConstVector row_max,
                      ConstVector stats, std::int64_t offset, float scale, Matrix dlogits);

}  // namespace trellis::kernels
