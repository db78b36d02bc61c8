// Rotary position embedding (RoPE, Su et al. 2021) on the query and key heads of fused q|k|v
// rows, in place, as Hugging Face's Llama applies it (rotate_half: column i of a head pairs with
// column i + hd/2, not with its neighbour as Meta's original code does; the checkpoint
// converters permute the weights between the two).
//
//   inv_freq_i = theta^(-2i / hd)                 i in [0, hd/2)  (Llama 3 scaling below)
//   angle(p, i) = p * inv_freq_i                  p = the token's position in its sequence
//   forward:   a' = a cos - b sin,   b' = b cos + a sin      (a, b) = (x_i, x_{i + hd/2})
//   backward:  the transpose, a rotation by -angle:  da = da' cos + db' sin,
//              db = db' cos - da' sin                        (in place on dq and dk)
// Values (v) are not rotated. A rotation leaves norms unchanged, so q.k depends on the two
// positions only through their difference: the relative position the attention sees.
//
// Llama 3's frequency scaling (HF rope_type "llama3"): with factor f, low_freq_factor l,
// high_freq_factor h and original context L, wavelengths 2 pi / inv_freq longer than L / l
// are divided by f, those shorter than L / h kept, and those between blended linearly in
// L / wavelen between the two. factor 0 means none.
//
// Precision: the angle is the float product p * inv_freq as Hugging Face computes it (its
// inv_freq rounded to float), its cos and sin rounded from double.
//
// Tables: cos, sin [positions, hd/2], row p for position p, built once per model. Rows of a
// call are whole sequences of seq_len tokens (row r at position first_position + r % seq_len);
// generation with a cache passes seq_len 1 and the token's position as first_position.
#pragma once

#include "trellis/kernels/attention/qkv_layout.hpp"
#include "trellis/kernels/views.hpp"

#include <vector>

namespace trellis::kernels {

struct RopeSpec {
  double theta = 10000.0;
  // Llama 3 scaling; factor 0: none.
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_context = 8192;
};

// inv_freq_i, i in [0, hd/2), as float values (scaling applied). Throws Error for an odd or
// non-positive head_dim, theta <= 1, or a scaling with factor < 1 or low >= high.
std::vector<float> rope_inverse_frequencies(const RopeSpec& spec, int head_dim);

// cos and sin [positions * hd/2], row-major [positions, hd/2] (written).
void rope_tables(const RopeSpec& spec, int head_dim, int positions, Vector cos, Vector sin);

// Rotates the query and key heads of qkv [n, layout.width()] in place (values untouched).
// n % seq_len == 0; the tables must hold positions up to first_position + seq_len - 1.
void rope_forward(Matrix qkv, const QkvLayout& layout, int seq_len, int first_position,
                  ConstVector cos, ConstVector sin);
// The same rotation backwards, on the gradient dqkv (in place).
void rope_backward(Matrix dqkv, const QkvLayout& layout, int seq_len, int first_position,
                   ConstVector cos, ConstVector sin);

}  // namespace trellis::kernels
