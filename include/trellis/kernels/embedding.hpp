// Embedding tables: token lookup (gather) and learned positions, forward and backward.
//
// Shapes: tokens [>= n] int32, weight/dweight [vocab, d], x/y/dy/out [n, d], pos/dpos [T, d].
// Every parameter-gradient kernel accumulates (+=) and is deterministic: each output element
// is owned by one thread that adds its contributions in increasing row order. No atomics and
// no sort, so the result is bitwise reproducible on any backend.
#pragma once

#include "trellis/kernels/views.hpp"

#include <string>

namespace trellis::kernels {

// out[r, :] = weight[tokens[r], :] for r in [0, n), n = out.extent(0).
// A token id outside [0, vocab) throws trellis::InputError naming the id, its position (the
// row of this call, 0-based; the lowest bad one) and `table` (e.g. "wte"); that row of out is
// zeroed. The check rides on the gather (one reduction), so valid input costs one fence.
// Vocabulary-parallel tables (weight = rows [vocab_offset, vocab_offset + weight rows) of a
// logical_vocab-row table): ids are checked against logical_vocab, and rows whose id another
// rank holds get 0 (the caller sums the ranks' outputs). logical_vocab < 0: weight's rows.
void embedding_forward(ConstLabels tokens, ConstMatrix weight, Matrix out, const std::string& table,
                       std::int64_t vocab_offset = 0, std::int64_t logical_vocab = -1);

// dweight[v, j] += sum over rows r with tokens[r] == v of dy[r, j], rows in increasing order.
// One thread per column j walks all rows: O(n d) work, parallel over d. (On GPUs with large
// vocabularies and batches a sort-by-id segmented sum would expose more parallelism; this is
// the simple deterministic form.) Ids outside [0, vocab), which forward rejects, are skipped.
// Vocabulary-parallel: only ids in [vocab_offset, vocab_offset + dweight rows) contribute.
void embedding_backward(ConstLabels tokens, ConstMatrix dy, Matrix dweight,
                        std::int64_t vocab_offset = 0);

// y[r, :] = x[r, :] + pos[r % T, :], T = pos.extent(0): row r is position r % T of its
// sequence (rows hold whole sequences back to back). x and y may alias.
void position_add(ConstMatrix x, ConstMatrix pos, Matrix y);

// dpos[t, j] += sum over rows r with r % T == t of dy[r, j], r increasing (one thread per
// element of dpos).
void position_backward(ConstMatrix dy, Matrix dpos);

}  // namespace trellis::kernels
