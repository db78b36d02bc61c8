// Tensor parallelism (nn/tensor_parallel.hpp) against the unsplit layers, at tp = the world
// size (pp = 1). Every rank builds each layer twice: whole, in one ParameterStore, and split
// over tp, in another; both stores are finalized with the same seed and both layers get the
// same inputs (counter-based fills, identical on every rank). Each rank's shard or slice must
// then equal the matching part of the whole layer's tensors:
//   init         every shard is its slice of the whole tensor, bitwise (fused q|k|v included)
//   Linear       Split::column and Split::row: output, input gradient, parameter gradients
//   Embedding    vocabulary-parallel lookup and gradient; a bad id throws on every rank
//   xent         vocabulary-parallel loss, correct count (ties: first index), dlogits
//   attention    heads split over tp, with dropout: masks drawn at logical positions
// At 1 rank tp is inactive and the split layers are plain ones, which must pass too. A size
// that tp does not divide (4 heads at 3 ranks) skips its case with a SUCCEED message.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"

#include "unit/support/nn_helpers.hpp"

#include "trellis/comm/process_grid.hpp"
#include "trellis/core/error.hpp"
#include "trellis/kernels/random_fill.hpp"
#include "trellis/nn/attention.hpp"
#include "trellis/nn/embedding.hpp"
#include "trellis/nn/linear.hpp"
#include "trellis/nn/parameter_store.hpp"
#include "trellis/nn/softmax_xent.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

using namespace trellis;
using trellis::test::labels_to_device;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr std::uint64_t kSeed = 2024;  // both stores
constexpr double kTol = 1e-5;          // relative, for sums taken in another order

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The whole world as one tp group: ProcessGrid(world, tp = world size, pp = 1).
struct TpWorld {
  ProcessGrid grid{MPI_COMM_WORLD, world_size(), 1};
  nn::TensorParallel tp{&grid.communicator(Axis::tp)};

  int size() const { return tp.size(); }
  int rank() const { return tp.rank(); }
  // Whether every extent splits evenly over tp; if not, the case is skipped with a message.
  bool divides(std::initializer_list<int> extents) const {
    for (const int e : extents) {
      if (e % size() != 0) {
        SUCCEED("skipped: tp = " << size() << " does not divide " << e);
        return false;
      }
    }
    return true;
  }
};

// Rows [r0, r1) of a row-major host matrix with `cols` columns (cols = 1: a vector's range).
std::vector<float> row_range(const std::vector<float>& m, std::size_t cols, std::size_t r0,
                             std::size_t r1) {
  return std::vector<float>(m.begin() + static_cast<std::ptrdiff_t>(r0 * cols),
                            m.begin() + static_cast<std::ptrdiff_t>(r1 * cols));
}

// Columns [c0, c1) of a row-major host matrix with `cols` columns.
std::vector<float> column_range(const std::vector<float>& m, std::size_t cols, std::size_t c0,
                                std::size_t c1) {
  std::vector<float> out;
  for (std::size_t r = 0; r < m.size() / cols; ++r)
    out.insert(out.end(), m.begin() + static_cast<std::ptrdiff_t>(r * cols + c0),
               m.begin() + static_cast<std::ptrdiff_t>(r * cols + c1));
  return out;
}

// Piece `index` of `parts` of rows of a tensor split into `parts` pieces: rows
// [index * R / parts, (index + 1) * R / parts) of R = m.size() / cols.
std::vector<float> row_piece(const std::vector<float>& m, std::size_t cols, int parts, int index) {
  const std::size_t piece = m.size() / cols / static_cast<std::size_t>(parts);
  const auto i = static_cast<std::size_t>(index);
  return row_range(m, cols, i * piece, (i + 1) * piece);
}

// The fused q|k|v layout: the rows are `sections` equal blocks, and the shard of rank `index`
// of `parts` is rows [s * R/S + index * R/(S parts), ...) of each block s, blocks in order.
std::vector<float> section_piece(const std::vector<float>& m, std::size_t cols, int sections,
                                 int parts, int index) {
  const std::size_t block = m.size() / cols / static_cast<std::size_t>(sections);
  const std::size_t piece = block / static_cast<std::size_t>(parts);
  const auto i = static_cast<std::size_t>(index);
  std::vector<float> out;
  for (std::size_t s = 0; s < static_cast<std::size_t>(sections); ++s) {
    const std::vector<float> rows =
        row_range(m, cols, s * block + i * piece, s * block + (i + 1) * piece);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

// Columns [index * C / parts, (index + 1) * C / parts) of a [rows, cols] host matrix.
std::vector<float> column_piece(const std::vector<float>& m, std::size_t cols, int parts,
                                int index) {
  const std::size_t piece = cols / static_cast<std::size_t>(parts);
  const auto i = static_cast<std::size_t>(index);
  return column_range(m, cols, i * piece, (i + 1) * piece);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max |a - b| / max |b|; 1 for a size mismatch or an empty b.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || b.empty()) return 1.0;
  double scale = 0.0, worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return scale > 0.0 ? worst / scale : worst;
}

// Rows [0, n) of a layer buffer, on the host.
std::vector<float> host_rows(ConstMatrix m, int n) { return to_host(kernels::first_rows(m, n)); }

// A parameter's values / gradient by name, on the host.
std::vector<float> param(const nn::ParameterStore& store, const std::string& name) {
  return to_host(store.param(store.index(name)));
}
std::vector<float> grad(const nn::ParameterStore& store, const std::string& name) {
  return to_host(store.grad(store.index(name)));
}

// [count] uniform values in [-1, 1), the same on every rank.
FloatView uniform_input(const std::string& label, std::size_t count, std::uint64_t stream) {
  FloatView v(label, count);
  kernels::fill_uniform(v, -1.0f, 1.0f, 99, stream);
  return v;
}

}  // namespace

TEST_CASE("tp: sharded initialisation equals the slices of the whole tensors", "[tp_mpi]") {
  TpWorld world;
  const int tp = world.size(), r = world.rank();
  const int in = 12, out = 24, fused = 36, vocab = 36, dim = 8, cap = 4;
  const int d = 16, heads = 4, seq = 4;
  const bool with_attention = heads % tp == 0;
  if (!with_attention) SUCCEED("attention skipped: tp = " << tp << " does not divide 4 heads");

  nn::ParameterStore whole_store, split_store;
  // Whole layers, unsplit.
  nn::Linear whole_col(whole_store, "col", in, out, cap);
  nn::Linear whole_qkv(whole_store, "qkv", in, fused, cap, nn::InitSpec::normal(0.02),
                       nn::InitSpec::uniform(-0.5, 0.5));
  nn::Linear whole_row(whole_store, "row", out, in, cap);
  nn::Embedding whole_emb(whole_store, "wte", vocab, dim, cap);
  // The same names split over tp.
  nn::Linear split_col(split_store, "col", in, out, cap, nn::LinearInit::kaiming, nn::Split::column,
                       world.tp);
  nn::Linear split_qkv(split_store, "qkv", in, fused, cap, nn::InitSpec::normal(0.02),
                       nn::InitSpec::uniform(-0.5, 0.5), nn::Split::column, world.tp, 3);
  nn::Linear split_row(split_store, "row", out, in, cap, nn::LinearInit::kaiming, nn::Split::row,
                       world.tp);
  nn::Embedding split_emb(split_store, "wte", vocab, dim, cap, nn::InitSpec::normal(0.02),
                          world.tp);
  std::unique_ptr<nn::CausalSelfAttention> whole_attn, split_attn;
  if (with_attention) {
    whole_attn =
        std::make_unique<nn::CausalSelfAttention>(whole_store, "attn", d, heads, seq, seq, 0.0f);
    split_attn = std::make_unique<nn::CausalSelfAttention>(split_store, "attn", d, heads, seq, seq,
                                                           0.0f, nn::TransformerInit{}, world.tp);
  }
  whole_store.finalize(kSeed);
  split_store.finalize(kSeed);

  CHECK(split_store.size() == whole_store.size());
  // name, expected shard (from the whole tensor), expected local shape
  struct Expected {
    std::string name;
    std::vector<float> values;
    Shape shape;
  };
  const auto whole = [&](const std::string& name) { return param(whole_store, name); };
  std::vector<Expected> expected = {
      {"col.weight", row_piece(whole("col.weight"), in, tp, r), {out / tp, in}},
      {"col.bias", row_piece(whole("col.bias"), 1, tp, r), {out / tp}},
      {"qkv.weight", section_piece(whole("qkv.weight"), in, 3, tp, r), {fused / tp, in}},
      {"qkv.bias", section_piece(whole("qkv.bias"), 1, 3, tp, r), {fused / tp}},
      {"row.weight", column_piece(whole("row.weight"), out, tp, r), {in, out / tp}},
      {"row.bias", whole("row.bias"), {in}},
      {"wte.weight", row_piece(whole("wte.weight"), dim, tp, r), {vocab / tp, dim}},
  };
  if (with_attention) {
    expected.push_back({"attn.c_attn.weight",
                        section_piece(whole("attn.c_attn.weight"), d, 3, tp, r),
                        {3 * d / tp, d}});
    expected.push_back(
        {"attn.c_attn.bias", section_piece(whole("attn.c_attn.bias"), 1, 3, tp, r), {3 * d / tp}});
    expected.push_back(
        {"attn.c_proj.weight", column_piece(whole("attn.c_proj.weight"), d, tp, r), {d, d / tp}});
    expected.push_back({"attn.c_proj.bias", whole("attn.c_proj.bias"), {d}});
  }
  for (const Expected& e : expected) {
    INFO(e.name << " on rank " << r << " of tp " << tp);
    const auto i = split_store.find(e.name);
    CHECK(i.has_value());
    if (!i) continue;
    CHECK(split_store.info(*i).shape == e.shape);
    CHECK(split_store.info(*i).logical_shape == whole_store.info(whole_store.index(e.name)).shape);
    CHECK(bitwise_equal(to_host(split_store.param(*i)), e.values));
  }
  CHECK(split_col.out_features() == out / tp);
  CHECK(split_row.in_features() == out / tp);
  CHECK(split_emb.local_vocab() == vocab / tp);
  CHECK(split_emb.vocab_offset() == r * (vocab / tp));
}

TEST_CASE("tp: a column-parallel Linear computes its columns of the whole output", "[tp_mpi]") {
  TpWorld world;
  const int tp = world.size(), r = world.rank();
  const int in = 12, out = 24, n = 5;
  if (!world.divides({out})) return;

  nn::ParameterStore whole_store, split_store;
  nn::Linear whole(whole_store, "fc", in, out, n);
  nn::Linear split(split_store, "fc", in, out, n, nn::LinearInit::kaiming, nn::Split::column,
                   world.tp);
  whole_store.finalize(kSeed);
  split_store.finalize(kSeed);
  CHECK(split.in_features() == in);
  CHECK(split.out_features() == out / tp);

  const FloatView x = uniform_input("x", std::size_t{n} * in, 1);
  const nn::StepContext ctx;
  whole.forward(as_matrix(x, n, in), n, ctx);
  split.forward(as_matrix(x, n, in), n, ctx);
  const std::vector<float> y_whole = host_rows(whole.output(), n);
  CHECK(relative_error(host_rows(split.output(), n), column_piece(y_whole, out, tp, r)) <= kTol);

  // Each rank gets its columns of the whole output gradient.
  const std::vector<float> dy = to_host(uniform_input("dy", std::size_t{n} * out, 2));
  const FloatView dy_whole = to_device("dy_whole", dy);
  const FloatView dy_split = to_device("dy_split", column_piece(dy, out, tp, r));
  whole.backward(as_matrix(dy_whole, n, out), n);
  split.backward(as_matrix(dy_split, n, out / tp), n);
  INFO("rank " << r << " of tp " << tp);
  CHECK(relative_error(host_rows(split.input_grad(), n), host_rows(whole.input_grad(), n)) <= kTol);
  CHECK(relative_error(grad(split_store, "fc.weight"),
                       row_piece(grad(whole_store, "fc.weight"), in, tp, r)) <= kTol);
  CHECK(relative_error(grad(split_store, "fc.bias"),
                       row_piece(grad(whole_store, "fc.bias"), 1, tp, r)) <= kTol);
}

TEST_CASE("tp: a row-parallel Linear reduces to the whole output", "[tp_mpi]") {
  TpWorld world;
  const int tp = world.size(), r = world.rank();
  const int in = 24, out = 12, n = 5;
  if (!world.divides({in})) return;

  nn::ParameterStore whole_store, split_store;
  nn::Linear whole(whole_store, "proj", in, out, n);
  nn::Linear split(split_store, "proj", in, out, n, nn::LinearInit::kaiming, nn::Split::row,
                   world.tp);
  whole_store.finalize(kSeed);
  split_store.finalize(kSeed);
  CHECK(split.in_features() == in / tp);
  CHECK(split.out_features() == out);

  // Each rank reads its columns of the whole input.
  const std::vector<float> x = to_host(uniform_input("x", std::size_t{n} * in, 3));
  const FloatView x_whole = to_device("x_whole", x);
  const FloatView x_split = to_device("x_split", column_piece(x, in, tp, r));
  const nn::StepContext ctx;
  whole.forward(as_matrix(x_whole, n, in), n, ctx);
  split.forward(as_matrix(x_split, n, in / tp), n, ctx);
  INFO("rank " << r << " of tp " << tp);
  CHECK(relative_error(host_rows(split.output(), n), host_rows(whole.output(), n)) <= kTol);

  const FloatView dy = uniform_input("dy", std::size_t{n} * out, 4);
  whole.backward(as_matrix(dy, n, out), n);
  split.backward(as_matrix(dy, n, out), n);
  CHECK(relative_error(host_rows(split.input_grad(), n),
                       column_piece(host_rows(whole.input_grad(), n), in, tp, r)) <= kTol);
  CHECK(relative_error(grad(split_store, "proj.weight"),
                       column_piece(grad(whole_store, "proj.weight"), in, tp, r)) <= kTol);
  CHECK(relative_error(grad(split_store, "proj.bias"), grad(whole_store, "proj.bias")) <= kTol);
}

TEST_CASE("tp: a vocabulary-parallel Embedding looks up the whole table", "[tp_mpi]") {
  TpWorld world;
  const int tp = world.size(), r = world.rank();
  const int vocab = 36, dim = 8;
  if (!world.divides({vocab})) return;
  // Ids over the whole vocabulary (both ends, every rank's slice, repeats).
  const std::vector<std::int32_t> ids = {0, 35, 17, 9, 18, 26, 27, 8, 35, 1, 0, 30};
  const int n = static_cast<int>(ids.size());

  nn::ParameterStore whole_store, split_store;
  nn::Embedding whole(whole_store, "wte", vocab, dim, n);
  nn::Embedding split(split_store, "wte", vocab, dim, n, nn::InitSpec::normal(0.02), world.tp);
  whole_store.finalize(kSeed);
  split_store.finalize(kSeed);

  const IntView tokens = labels_to_device(ids);
  const nn::StepContext ctx;
  whole.forward(tokens, n, ctx);
  split.forward(tokens, n, ctx);
  INFO("rank " << r << " of tp " << tp);
  // One rank holds each row, the others add zeros: exact.
  CHECK(host_rows(split.output(), n) == host_rows(whole.output(), n));

  const FloatView dy = uniform_input("dy", std::size_t(n) * dim, 5);
  whole.backward(as_matrix(dy, n, dim), n);
  split.backward(as_matrix(dy, n, dim), n);
  CHECK(grad(split_store, "wte.weight") == row_piece(grad(whole_store, "wte.weight"), dim, tp, r));

  // A bad id is rejected on every rank (before any collective), wherever it would sit.
  for (const std::int32_t bad : {vocab, -1, 1000}) {
    INFO("id " << bad);
    const IntView bad_tokens = labels_to_device({3, 20, bad, 7});
    CHECK_THROWS_AS(split.forward(bad_tokens, 4, ctx), InputError);
    CHECK_THROWS_AS(whole.forward(bad_tokens, 4, ctx), InputError);
  }
  // And the layer still works afterwards.
  split.forward(tokens, n, ctx);
  whole.forward(tokens, n, ctx);
  CHECK(host_rows(split.output(), n) == host_rows(whole.output(), n));
}

TEST_CASE("tp: vocabulary-parallel softmax cross-entropy equals the whole one", "[tp_mpi]") {
  TpWorld world;
  const int tp = world.size(), r = world.rank();
  const int classes = 24, n = 7;
  if (!world.divides({classes})) return;
  const int local = classes / tp;

  // Logits in [-2, 2), then in each row a maximum of 6.5 at class a, and at class b too when
  // b >= 0: ties between ranks' slices (for tp > 1 where the sizes allow), whose argmax is the
  // first index, as in the unsplit layer.
  struct Row {
    int a, b, label;
  };
  const Row rows[n] = {
      {1, 22, 1},    // first and last slice: correct
      {1, 22, 22},   // the second of a tie: wrong
      {13, 19, 13},  // two middle slices (at tp 4), rank 0 holds neither: correct
      {5, 6, 6},     // adjacent slices at tp 4: wrong
      {11, 12, 11},  // across the slice boundary at tp 2: correct
      {17, -1, 17},  // a unique maximum: correct
      {3, -1, 9},    // the label off the maximum: wrong
  };
  const std::int64_t expected_correct = 4;
  std::vector<float> z = to_host(uniform_input("z", std::size_t{n} * classes, 6));
  for (float& v : z) v *= 2.0f;
  std::vector<std::int32_t> labels;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    for (const int c : {rows[i].a, rows[i].b})
      if (c >= 0) z[i * classes + static_cast<std::size_t>(c)] = 6.5f;
    labels.push_back(rows[i].label);
  }

  const FloatView z_whole = to_device("z_whole", z);
  const FloatView z_split = to_device("z_split", column_piece(z, classes, tp, r));
  const IntView y = labels_to_device(labels);
  nn::SoftmaxCrossEntropy whole(classes, n);
  nn::SoftmaxCrossEntropy split(local, n, r * local, classes, world.tp);
  const kernels::XentResult a = whole.forward(as_matrix(z_whole, n, classes), y, n);
  const kernels::XentResult b = split.forward(as_matrix(z_split, n, local), y, n);
  INFO("rank " << r << " of tp " << tp << ": loss " << b.loss_sum << " vs " << a.loss_sum);
  CHECK(std::fabs(b.loss_sum - a.loss_sum) <= 1e-6 * std::fabs(a.loss_sum));
  CHECK(a.correct == expected_correct);
  CHECK(b.correct == a.correct);

  const float scale = 1.0f / static_cast<float>(n);
  whole.backward(scale);
  split.backward(scale);
  CHECK(relative_error(host_rows(split.input_grad(), n),
                       column_piece(host_rows(whole.input_grad(), n), classes, tp, r)) <= kTol);

  // A bad label is rejected on every rank.
  const IntView bad = labels_to_device({0, 3, classes, 2, 1, 0, 4});
  CHECK_THROWS_AS(split.forward(as_matrix(z_split, n, local), bad, n), InputError);
}

TEST_CASE("tp: attention with its heads split equals the whole layer, dropout included",
          "[tp_mpi]") {
  TpWorld world;
  const int tp = world.size(), r = world.rank();
  const int d = 16, heads = 4, seq = 4, n = 3 * seq;
  const float p = 0.1f;
  if (!world.divides({heads})) return;

  nn::ParameterStore whole_store, split_store;
  nn::CausalSelfAttention whole(whole_store, "attn", d, heads, seq, n, p);
  nn::CausalSelfAttention split(split_store, "attn", d, heads, seq, n, p, nn::TransformerInit{},
                                world.tp);
  whole_store.finalize(kSeed);
  split_store.finalize(kSeed);
  CHECK(split.n_head() == heads / tp);

  const FloatView x = uniform_input("x", std::size_t{n} * d, 7);
  nn::StepContext ctx;
  ctx.seed = 11;
  ctx.step = 3;
  ctx.first_sample = 2 * seq;  // this call's rows start at sequence 2 of the batch
  ctx.training = true;
  whole.forward(as_matrix(x, n, d), n, ctx);
  split.forward(as_matrix(x, n, d), n, ctx);
  INFO("rank " << r << " of tp " << tp);
  const std::vector<float> y_whole = host_rows(whole.output(), n);
  CHECK(relative_error(host_rows(split.output(), n), y_whole) <= kTol);

  const FloatView dy = uniform_input("dy", std::size_t{n} * d, 8);
  whole.backward(as_matrix(dy, n, d), n);
  split.backward(as_matrix(dy, n, d), n);
  CHECK(relative_error(host_rows(split.input_grad(), n), host_rows(whole.input_grad(), n)) <= kTol);
  CHECK(relative_error(grad(split_store, "attn.c_attn.weight"),
                       section_piece(grad(whole_store, "attn.c_attn.weight"), d, 3, tp, r)) <=
        kTol);
  CHECK(relative_error(grad(split_store, "attn.c_attn.bias"),
                       section_piece(grad(whole_store, "attn.c_attn.bias"), 1, 3, tp, r)) <= kTol);
  CHECK(relative_error(grad(split_store, "attn.c_proj.weight"),
                       column_piece(grad(whole_store, "attn.c_proj.weight"), d, tp, r)) <= kTol);
  CHECK(relative_error(grad(split_store, "attn.c_proj.bias"),
                       grad(whole_store, "attn.c_proj.bias")) <= kTol);

  // The comparison above is only about dropout if dropout changed something.
  nn::StepContext eval = ctx;
  eval.training = false;
  whole.forward(as_matrix(x, n, d), n, eval);
  CHECK(relative_error(host_rows(whole.output(), n), y_whole) > 1e-3);
}
