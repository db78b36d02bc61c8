#include "trellis/train/commands/generate_command.hpp"
#include "trellis/train/commands/command.hpp"

#include "trellis/comm/mpi_check.hpp"
#include "trellis/train/files/int8_weights.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/rng.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/input/batch_buffers.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
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

}  // namespace

void generate_command(MPI_Comm world, const GenerateOptions& options, const Logger& log) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  if (rank != 0) return;  // sampling one sequence is serial work; other ranks just exit
  const MpiComm self = MpiComm::borrow(MPI_COMM_SELF);

  const TrainConfig config = saved_config(options.weights);
  if (model_registration(config.model.type).data != DataKind::tokens)
    throw ConfigError(options.weights + ": model.type = " + model_type_name(config.model.type) +
                      "; generate needs a language model (one trained on token data)");
  if (config.model.vocab <= 0)
    throw InputError(options.weights +
                     ": the stored config has no model.vocab (written by an older trellis?)");
  const int seq_len = config.model.seq_len, vocab = config.model.vocab;
  DataShape shape;
  shape.classes = vocab;
  shape.seq_len = seq_len;
  // An int8 model (trellis quantize) runs in its int8 form: its Linears and tied head int8;
  // LayerNorm, attention, the embeddings and the residual stream stay fp32.
  SavedModel saved;
  open_saved_model(saved, options.weights, config, shape, 1);
  nn::Model* model = saved.model.get();

  std::vector<int> context;
  for (unsigned char c : options.prompt) context.push_back(c);
  if (context.empty()) context.push_back('\n');
  for (int id : context)
    if (id >= vocab)
      throw ConfigError("prompt byte " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(vocab));

  BatchBuffers buffers(1, 0, seq_len);  // tokens [1, seq_len]
  HostFloatView row("trellis::generate::logits", static_cast<std::size_t>(vocab));
  std::vector<float> logits(static_cast<std::size_t>(vocab));
  std::vector<int> order;
  std::vector<double> weights;
  std::string text = options.prompt;
  nn::StepContext ctx;
  ctx.training = false;
  const std::uint64_t stream = stream_from_name("generate");
  if (!options.logits.empty()) {  // the prompt's window, in one forward pass
    const std::size_t length =
        std::min<std::size_t>(context.size(), static_cast<std::size_t>(seq_len));
    for (std::size_t t = 0; t < static_cast<std::size_t>(seq_len); ++t)
      buffers.host_tokens(t) = t < length ? context[context.size() - length + t] : 0;
    buffers.upload(1);
    nn::ModelInput input;
    input.tokens = buffers.token_rows(0, 1);
    const ConstMatrix out = model->forward(input, 1, ctx);
    const auto host = Kokkos::create_mirror_view_and_copy(
        HostSpace(), Kokkos::subview(out, std::make_pair(std::size_t{0}, length), Kokkos::ALL()));
    std::vector<float> values(length * static_cast<std::size_t>(vocab));
    for (std::size_t t = 0; t < length; ++t)
      for (int v = 0; v < vocab; ++v)
        values[t * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(v)] = host(t, v);
    write_npy(options.logits, values, length, static_cast<std::size_t>(vocab));
  }
  for (std::int64_t i = 0; i < options.tokens; ++i) {
    const std::size_t length =
        std::min<std::size_t>(context.size(), static_cast<std::size_t>(seq_len));
    for (std::size_t t = 0; t < static_cast<std::size_t>(seq_len); ++t)
      buffers.host_tokens(t) = t < length ? context[context.size() - length + t] : 0;
    buffers.upload(1);
    nn::ModelInput input;
    input.tokens = buffers.token_rows(0, 1);
    ConstMatrix out = model->forward(input, 1, ctx);
    Kokkos::deep_copy(row, Kokkos::subview(out, length - 1, Kokkos::ALL()));
    std::copy(row.data(), row.data() + vocab, logits.begin());
    const double u = random_uniform(options.seed, stream, static_cast<std::uint64_t>(i));
    const int next = sample_token(logits, options.temperature, options.top_k, u, order, weights);
    context.push_back(next);
    if (vocab <= 256)
      text.push_back(static_cast<char>(next));
    else
      text += " " + std::to_string(next);
  }
  log.info(text);
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
  generate_command(context.world, options, context.log);
  return 0;
}

}  // namespace trellis
