#include "trellis/train/commands/generate_command.hpp"
#include "trellis/train/commands/command.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/train/files/int8_weights.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/core/timer.hpp"
#include "trellis/data/tokenizer_blob.hpp"
#include "trellis/nn/gpt.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/hf/bpe_tokenizer.hpp"
#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

namespace trellis {

namespace {

// Index drawn from softmax(logits / temperature) over the top_k largest logits.
int sample_token(const std::vector<float>& logits, double temperature, int top_k, double uniform,
                 std::vector<int>& order, std::vector<double>& weights) {
  const int vocab = static_cast<int>(logits.size());
  const int k = top_k > 0 ? std::min(top_k, vocab) : vocab;
  order.resize(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
  });
  if (temperature <= 0) return order[0];  // greedy
  const double top = logits[static_cast<std::size_t>(order[0])];
  weights.resize(static_cast<std::size_t>(k));
  double total = 0;
  for (int i = 0; i < k; ++i) {
    weights[static_cast<std::size_t>(i)] = std::exp(
        (logits[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] - top) / temperature);
    total += weights[static_cast<std::size_t>(i)];
  }
  double threshold = uniform * total;
  for (int i = 0; i < k; ++i) {
    threshold -= weights[static_cast<std::size_t>(i)];
    if (threshold < 0) return order[static_cast<std::size_t>(i)];
  }
  return order[static_cast<std::size_t>(k - 1)];
}

// rows x cols float32 values as a .npy file (format 1.0: magic, header length, a Python dict
// padded with spaces to a multiple of 64 bytes and ended by a newline, then the data).
void write_npy(const std::string& path, const std::vector<float>& values, std::size_t rows,
               std::size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(header.size() & 0xff),
                          static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  out.close();
  if (!out) throw Error(path + ": cannot write the logits");
}

// The text <-> ids of the model: its BPE tokenizer (kept in the weights file), else bytes
// (vocab <= 256: the byte tokenizer), else ids written as numbers.
struct TextCodec {
  std::optional<BpeTokenizer> bpe;
  int vocab = 0;

  std::vector<int> encode(const std::string& text) const {
    std::vector<int> ids;
    if (bpe) {
      for (std::int32_t id : bpe->encode(text)) ids.push_back(id);
    } else {
      for (unsigned char c : text) ids.push_back(c);
    }
    for (int id : ids)
      if (id >= vocab)
        throw ConfigError("prompt token " + std::to_string(id) + " is outside the vocabulary of " +
                          std::to_string(vocab));
    return ids;
  }
  std::string decode(const std::vector<int>& ids) const {
    if (bpe) return bpe->decode(std::vector<std::int32_t>(ids.begin(), ids.end()));
    std::string text;
    for (int id : ids)
      text += vocab <= 256 ? std::string(1, static_cast<char>(id)) : " " + std::to_string(id);
    return text;
  }
};

// The next token's logits without a cache: the last seq_len tokens of the context are placed
// at the start of a window and the whole window is recomputed for every token.
// Under tensor parallelism each tp rank computes the logits of its vocab/tp classes (a
// contiguous block, in rank order): the rows are all-gathered over `tp` (MPI_COMM_NULL: none).
class WindowDecoder {
 public:
  WindowDecoder(nn::Model& model, int seq_len, int vocab, MPI_Comm tp = MPI_COMM_NULL)
      : model_(model),
        buffers_(1, 0, seq_len),
        seq_len_(seq_len),
        vocab_(vocab),
        tp_(tp),
        row_("trellis::generate::logits", static_cast<std::size_t>(model.local_classes())) {}

  // All positions' logits of the window, [length, vocab] (the last row: the next token's).
  ConstMatrix window(const std::vector<int>& context, std::size_t& length) {
    length = std::min<std::size_t>(context.size(), static_cast<std::size_t>(seq_len_));
    for (std::size_t t = 0; t < static_cast<std::size_t>(seq_len_); ++t)
      buffers_.host_tokens(t) = t < length ? context[context.size() - length + t] : 0;
    buffers_.upload(1);
    nn::ModelInput input;
    input.tokens = buffers_.token_rows(0, 1);
    nn::StepContext eval;
    eval.training = false;
    return model_.forward(input, 1, eval);
  }
  // The window's logits on the host, [length, vocab], every class.
  std::vector<float> window_logits(const std::vector<int>& context, std::size_t& length) {
    const ConstMatrix out = window(context, length);
    const auto host = Kokkos::create_mirror_view_and_copy(
        HostSpace(), Kokkos::subview(out, std::make_pair(std::size_t{0}, length), Kokkos::ALL()));
    const std::size_t local = host.extent(1);
    std::vector<float> mine(length * local);
    for (std::size_t t = 0; t < length; ++t)
      for (std::size_t v = 0; v < local; ++v) mine[t * local + v] = host(t, v);
    const std::vector<float> blocks = gather_classes(mine);  // [tp][length][local]
    std::vector<float> values(length * static_cast<std::size_t>(vocab_));
    for (std::size_t b = 0; b < blocks.size() / (length * local); ++b)
      for (std::size_t t = 0; t < length; ++t)
        std::copy_n(blocks.begin() + static_cast<std::ptrdiff_t>((b * length + t) * local), local,
                    values.begin() + static_cast<std::ptrdiff_t>(t * vocab_ + b * local));
    return values;
  }
  std::vector<float> next(const std::vector<int>& context) {
    std::size_t length = 0;
    const ConstMatrix out = window(context, length);
    Kokkos::deep_copy(row_, Kokkos::subview(out, length - 1, Kokkos::ALL()));
    return gather_classes(std::vector<float>(row_.data(), row_.data() + row_.size()));
  }

 private:
  // Every tp rank's block of `mine`, in rank order (without tp: `mine`).
  std::vector<float> gather_classes(std::vector<float> mine) const {
    if (tp_ == MPI_COMM_NULL) return mine;
    int ranks = 1;
    TRELLIS_MPI(MPI_Comm_size(tp_, &ranks));
    std::vector<float> all(mine.size() * static_cast<std::size_t>(ranks));
    TRELLIS_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(),
                              static_cast<int>(mine.size()), MPI_FLOAT, tp_));
    return all;
  }

  nn::Model& model_;
  BatchBuffers buffers_;
  int seq_len_, vocab_;
  MPI_Comm tp_;
  HostFloatView row_;
};

// The next token's logits with key/value caches (nn::Gpt::forward_cached): the prompt is
// prefilled once, then each new token is one row. When the window is full, the cache restarts
// from the last seq_len / 2 tokens (one prefill per seq_len / 2 tokens), where the cache-less
// path slides by one token: the two agree while prompt and output fit in the window.
class CachedDecoder {
 public:
  CachedDecoder(nn::Gpt& gpt, int seq_len, int vocab)
      : gpt_(gpt),
        seq_len_(seq_len),
        caches_(gpt.make_caches()),
        ids_("trellis::generate::ids", static_cast<std::size_t>(seq_len)),
        host_ids_(Kokkos::create_mirror_view(ids_)),
        row_("trellis::generate::logits", static_cast<std::size_t>(vocab)) {}

  // Prefills the last tokens of the context (at most seq_len, or seq_len / 2 on a restart).
  std::vector<float> prefill(const std::vector<int>& context, std::size_t keep) {
    const std::size_t n = std::min(context.size(), keep);
    for (std::size_t t = 0; t < n; ++t) host_ids_(t) = context[context.size() - n + t];
    filled_ = static_cast<int>(n);
    return run(filled_, 0);
  }
  // After context.push_back(token): that token's row, at the next position.
  std::vector<float> next(const std::vector<int>& context) {
    if (filled_ == seq_len_) {
      ++restarts_;
      return prefill(context, static_cast<std::size_t>(seq_len_ / 2));
    }
    host_ids_(0) = context.back();
    return run(1, filled_++);
  }
  int restarts() const { return restarts_; }

 private:
  std::vector<float> run(int rows, int first_position) {
    Kokkos::deep_copy(ids_, host_ids_);
    const ConstMatrix out = gpt_.forward_cached(ids_, rows, first_position, caches_);
    Kokkos::deep_copy(row_, Kokkos::subview(out, rows - 1, Kokkos::ALL()));
    return std::vector<float>(row_.data(), row_.data() + row_.size());
  }

  nn::Gpt& gpt_;
  int seq_len_, filled_ = 0, restarts_ = 0;
  std::vector<nn::KvCache> caches_;
  IntView ids_;
  IntView::HostMirror host_ids_;
  HostFloatView row_;
};

}  // namespace

void generate_command(MPI_Comm world, const GenerateOptions& options, const Logger& log) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  // Sampling one sequence is serial work: one rank does it, other ranks just exit; a model
  // spread over the ranks (--tp, --zero 3) runs on all of them in step, rank 0 drawing.
  const bool on_grid = options.layout.on_grid();
  if (!on_grid && rank != 0) return;
  TrainConfig config;
  DataShape shape;
  const auto read_config = [&] {
    config = saved_config(options.weights);
    if (model_registration(config.model.type).data != DataKind::tokens)
      throw ConfigError(options.weights + ": model.type = " + model_type_name(config.model.type) +
                        "; generate needs a language model (one trained on token data)");
    if (config.model.vocab <= 0)
      throw InputError(options.weights +
                       ": the stored config has no model.vocab (written by an older trellis?)");
    if (options.layout.pp > 1)
      throw ConfigError("generate --pp " + std::to_string(options.layout.pp) +
                        ": generation spreads a model over --tp and --zero 3, not pipeline stages");
    shape.classes = config.model.vocab;
    shape.seq_len = config.model.seq_len;
  };
  if (on_grid)
    run_agreed(world, log, read_config);
  else
    read_config();
  const int seq_len = config.model.seq_len, vocab = config.model.vocab;
  // An int8 model (trellis quantize) runs in its int8 form: its Linears and tied head int8;
  // LayerNorm, attention, the embeddings and the residual stream stay fp32.
  SavedModel saved;
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<ShardedModel> spread;
  nn::Model* model = nullptr;
  if (on_grid) {
    run_agreed(world, log, [&] {
      grid = std::make_unique<ProcessGrid>(world, options.layout.tp, 1, config.derived.backend);
    });
    spread = std::make_unique<ShardedModel>(*grid, options.weights, shape, 1, options.layout, log);
    model = &spread->model().model();
  } else {
    open_saved_model(saved, options.weights, config, shape, 1);
    model = saved.model.get();
  }

  TextCodec codec;
  codec.vocab = vocab;
  const std::string tokenizer = read_tokenizer_json(options.weights);
  if (!tokenizer.empty())
    codec.bpe = BpeTokenizer::from_json(tokenizer, options.weights + ":/tokenizer_json");
  std::vector<int> context = codec.encode(options.prompt);
  if (context.empty()) context = codec.encode("\n");
  const std::size_t prompt_tokens = context.size();

  WindowDecoder window(*model, seq_len, vocab,
                       grid && grid->size(Axis::tp) > 1 ? grid->tp().get() : MPI_COMM_NULL);
  if (!options.logits.empty()) {  // the prompt's window, in one forward pass
    std::size_t length = 0;
    const std::vector<float> values = window.window_logits(context, length);
    if (rank == 0) write_npy(options.logits, values, length, static_cast<std::size_t>(vocab));
  }
  // The cache needs the fp32 decoder on one rank; an int8 or a spread model recomputes its
  // window (the cached path runs the blocks without their tp reductions and ZeRO-3 gathers).
  auto* gpt = dynamic_cast<nn::Gpt*>(model);
  std::unique_ptr<CachedDecoder> cached;
  if (gpt != nullptr && !options.no_cache && !on_grid)
    cached = std::make_unique<CachedDecoder>(*gpt, seq_len, vocab);
  // Every rank draws the same token from the same logits; rank 0's is sent to all the same,
  // so the ranks cannot drift apart.
  const auto agree_on = [&](int token) {
    if (on_grid) TRELLIS_MPI(MPI_Bcast(&token, 1, MPI_INT, 0, world));
    return token;
  };

  std::vector<int> order;
  std::vector<double> weights;
  const std::uint64_t stream = stream_from_name("generate");
  Stopwatch prefill_timer;
  std::vector<float> logits =
      cached ? cached->prefill(context, static_cast<std::size_t>(seq_len)) : window.next(context);
  const double prefill_s = prefill_timer.fenced_seconds();
  Stopwatch decode_timer;
  for (std::int64_t i = 0; i < options.tokens; ++i) {
    const double u = random_uniform(options.seed, stream, static_cast<std::uint64_t>(i));
    context.push_back(
        agree_on(sample_token(logits, options.temperature, options.top_k, u, order, weights)));
    if (i + 1 < options.tokens) logits = cached ? cached->next(context) : window.next(context);
  }
  const double decode_s = decode_timer.fenced_seconds();
  const double decoded = static_cast<double>(std::max<std::int64_t>(options.tokens - 1, 0));
  const std::size_t prefilled = std::min(prompt_tokens, static_cast<std::size_t>(seq_len));
  log.info(format_text(
      "generate: prefill %zu tokens in %.3f s (%.0f tokens/s); decode %.0f tokens in %.3f s "
      "(%.1f tokens/s), %s",
      prefilled, prefill_s, static_cast<double>(prefilled) / std::max(prefill_s, 1e-9), decoded,
      decode_s, decoded / std::max(decode_s, 1e-9),
      cached ? ("key/value cache" + (cached->restarts() > 0
                                         ? ", restarted " + std::to_string(cached->restarts()) +
                                               " time(s) from the last seq_len / 2 tokens"
                                         : std::string()))
                   .c_str()
      : on_grid
          ? ("no cache (the whole window per token), model on " + grid->layout().describe()).c_str()
          : "no cache (the whole window per token)"));
  const std::vector<int> generated(context.begin() + static_cast<std::ptrdiff_t>(prompt_tokens),
                                   context.end());
  log.info(options.prompt + codec.decode(generated));
}

int run_generate_command(const CommandContext& context, const CommandArgs& args) {
  GenerateOptions options;
  options.weights = args.text("--weights");
  options.prompt = args.text("--prompt");
  options.tokens = args.integer("--tokens");
  options.temperature = args.real("--temperature");
  options.top_k = static_cast<int>(std::min<std::int64_t>(args.integer("--top-k"), 1 << 30));
  options.seed = static_cast<std::uint64_t>(args.integer("--seed"));
  options.logits = args.text("--logits");
  options.no_cache = args.flag("--no-cache");
  options.layout.tp = static_cast<int>(args.integer("--tp"));
  options.layout.pp = static_cast<int>(args.integer("--pp"));
  options.layout.zero = static_cast<int>(args.integer("--zero"));
  options.layout.memory_limit_gb = args.real("--memory-limit-gb");
  generate_command(context.world, options, context.log);
  return 0;
}

}  // namespace trellis
