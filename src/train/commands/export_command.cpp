#include "trellis/train/commands/export_command.hpp"
#include "trellis/train/commands/command.hpp"

#include "trellis/comm/agreement.hpp"
#include "trellis/comm/mpi_check.hpp"
#include "trellis/core/error.hpp"
#include "trellis/core/format.hpp"
#include "trellis/core/host_copy.hpp"
#include "trellis/data/tokenizer_blob.hpp"
#include "trellis/train/commands/saved_model.hpp"
#include "trellis/train/config/train_config.hpp"
#include "trellis/train/files/int8_weights.hpp"
#include "trellis/train/files/weights_file.hpp"
#include "trellis/train/model/model_registry.hpp"

#include <Kokkos_Core.hpp>

#include <map>
#include <memory>
#include <numeric>

namespace trellis {

namespace {

// The data shape the file's parameters were built for, by the model's registration; a model
// without structurally prunable units has nothing to export.
DataShape shape_from_weights(const TrainConfig& config, const std::string& path) {
  const ModelRegistration& model = model_registration(config.model.type);
  if (!model.set_pruned_widths || !model.data_shape_from_weights)
    throw ConfigError(
        path + ": export --prune removes MLP neurons and CNN channels; model.type = " + model.name +
        " has none");
  return model.data_shape_from_weights(config.model, [&](const std::string& name) {
    return read_weights_shape(path, "params/" + name);
  });
}

// Units of one group that are not entirely zero (weight row and followers); at least one
// stays, so a layer never ends up empty.
std::vector<std::int64_t> surviving_units(const SavedModel& m, const nn::PrunableUnits& units) {
  const nn::ParamInfo& info = m.store.info(m.store.index(units.weight));
  const std::int64_t rows = info.logical_shape.at(0),
                     row_size = shape_numel(info.logical_shape) / rows;
  const std::vector<float> weight = to_host_vector(m.store.param(m.store.index(units.weight)));
  std::vector<bool> alive(static_cast<std::size_t>(rows), false);
  for (std::int64_t e = 0; e < rows * row_size; ++e)
    if (weight[static_cast<std::size_t>(e)] != 0.0f)
      alive[static_cast<std::size_t>(e / row_size)] = true;
  for (const std::string& name : units.followers) {
    const std::vector<float> follower = to_host_vector(m.store.param(m.store.index(name)));
    for (std::size_t u = 0; u < follower.size(); ++u)
      if (follower[u] != 0.0f) alive[u] = true;
  }
  std::vector<std::int64_t> keep;
  for (std::int64_t u = 0; u < rows; ++u)
    if (alive[static_cast<std::size_t>(u)]) keep.push_back(u);
  if (keep.empty()) keep.push_back(0);
  return keep;
}

// Which indices of which dim each tensor keeps, and the surviving width of every unit group.
struct Selection {
  std::map<std::string, std::pair<int, std::vector<std::int64_t>>> rows, columns;
  std::vector<int> widths;
  std::string summary;  // "fc1.weight 256 -> 97, ..."

  // x (logical shape `logical`) with only the kept rows and columns of tensor `name`.
  std::vector<float> apply(const std::string& name, std::vector<float> values,
                           Shape logical) const {
    for (const auto* which : {&rows, &columns}) {
      const auto it = which->find(name);
      if (it == which->end()) continue;
      values = select_along(values, logical, it->second.first, it->second.second);
      logical[static_cast<std::size_t>(it->second.first)] =
          static_cast<std::int64_t>(it->second.second.size());
    }
    return values;
  }
};

Selection select_surviving(const SavedModel& dense) {
  Selection s;
  for (const nn::PrunableUnits& units : dense.model->prunable_units()) {
    const std::vector<std::int64_t> keep = surviving_units(dense, units);
    const std::int64_t before = dense.store.info(dense.store.index(units.weight)).logical_shape[0];
    s.widths.push_back(static_cast<int>(keep.size()));
    s.summary += format_text("%s%s %lld -> %zu", s.summary.empty() ? "" : ", ",
                             units.weight.c_str(), static_cast<long long>(before), keep.size());
    s.rows[units.weight] = {0, keep};
    for (const std::string& name : units.followers) s.rows[name] = {0, keep};
    for (const std::string& name : units.follower_buffers) s.rows[name] = {0, keep};
    if (!units.consumer.empty()) s.columns[units.consumer] = {1, keep};
  }
  return s;
}

// The small model's parameters and buffers, filled with what the dense one keeps, as pieces
// of a weights file.
std::vector<TensorPiece> selected_pieces(const SavedModel& dense, SavedModel& small,
                                         const Selection& selection) {
  std::vector<TensorPiece> pieces;
  for (std::size_t i = 0; i < small.store.size(); ++i) {
    const nn::ParamInfo& info = small.store.info(i);
    const std::size_t source = dense.store.index(info.name);
    copy_from_host(selection.apply(info.name, to_host_vector(dense.store.param(source)),
                                   dense.store.info(source).logical_shape),
                   small.store.param(i));
    TensorPiece piece;
    piece.name = "params/" + info.name;
    piece.logical_shape = info.logical_shape;
    piece.writer = true;
    piece.local = small.store.param(i);
    pieces.push_back(std::move(piece));
  }
  const std::vector<nn::NamedBuffer> dense_buffers = dense.model->buffers();
  for (const nn::NamedBuffer& buffer : small.model->buffers()) {
    for (const nn::NamedBuffer& from : dense_buffers) {
      if (from.name != buffer.name) continue;
      const FloatView values(from.data.data(), from.data.extent(0));
      copy_from_host(selection.apply(from.name, to_host_vector(values),
                                     {static_cast<std::int64_t>(from.data.extent(0))}),
                     FloatView(buffer.data.data(), buffer.data.extent(0)));
    }
    TensorPiece piece;
    piece.name = "buffers/" + buffer.name;
    piece.logical_shape = {static_cast<std::int64_t>(buffer.data.extent(0))};
    piece.writer = true;
    piece.local = FloatView(buffer.data.data(), buffer.data.extent(0));
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

std::int64_t parameter_count(const nn::ParameterStore& store) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < store.size(); ++i) total += shape_numel(store.info(i).logical_shape);
  return total;
}

void export_pruned(const ExportOptions& options, const Logger& log) {
  if (is_int8_weights(options.weights))
    throw ConfigError(options.weights + " is an int8 model; export --prune takes fp32 weights");
  TrainConfig config = saved_config(options.weights);
  const DataShape shape = shape_from_weights(config, options.weights);
  SavedModel dense;
  open_saved_model(dense, options.weights, config, shape, 1);
  const Selection selection = select_surviving(dense);
  if (selection.widths.empty())
    throw ConfigError(options.weights + ": the model has no prunable units to remove");
  model_registration(config.model.type).set_pruned_widths(config.model, selection.widths);
  config.prune.method = "none";  // the exported model is the result, not a run to prune
  SavedModel small;
  build_saved_model(small, config, shape, 1);
  write_weights_file(options.out, selected_pieces(dense, small, selection), config.to_ini(),
                     MPI_COMM_SELF, Hdf5Tuning{}, read_tokenizer_json(options.weights));
  log.info(format_text("export: %s -> %s (%s): %s; parameters %lld -> %lld",
                       options.weights.c_str(), options.out.c_str(),
                       small.model->describe().c_str(), selection.summary.c_str(),
                       static_cast<long long>(parameter_count(dense.store)),
                       static_cast<long long>(parameter_count(small.store))));
}

}  // namespace

std::vector<float> select_along(const std::vector<float>& x, const Shape& shape, int dim,
                                const std::vector<std::int64_t>& keep) {
  if (dim < 0 || dim >= static_cast<int>(shape.size()))
    throw Error("select_along: dim " + std::to_string(dim) + " out of range for " +
                shape_string(shape));
  const auto d = static_cast<std::size_t>(dim);
  const std::int64_t extent = shape[d];
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= shape[i];
  for (std::size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  if (static_cast<std::int64_t>(x.size()) != outer * extent * inner)
    throw Error("select_along: " + std::to_string(x.size()) + " values for shape " +
                shape_string(shape));
  for (const std::int64_t k : keep)
    if (k < 0 || k >= extent)
      throw Error("select_along: index " + std::to_string(k) + " out of range for dim " +
                  std::to_string(dim) + " of " + shape_string(shape));
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(outer * inner) * keep.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (const std::int64_t k : keep) {
      const auto first = x.begin() + (o * extent + k) * inner;
      out.insert(out.end(), first, first + inner);
    }
  return out;
}

void export_command(MPI_Comm world, const ExportOptions& options, const Logger& log) {
  int rank = 0;
  TRELLIS_MPI(MPI_Comm_rank(world, &rank));
  run_agreed(world, log, [&] {
    if (options.format == "hf") {
      if (options.prune)
        throw ConfigError("export: --prune writes a trellis weights file; not with --format hf");
      if (rank == 0) export_hf(options, log);
      return;
    }
    if (options.format != "trellis")
      throw ConfigError("export: --format " + options.format + ": expected trellis or hf");
    if (!options.prune)
      throw ConfigError(
          "export: nothing to do; --prune removes the units of a structurally "
          "pruned model (prune.method = structured), --format hf writes a Hugging Face "
          "model folder");
    if (rank == 0) export_pruned(options, log);
  });
}

int run_export_command(const CommandContext& context, const CommandArgs& args) {
  ExportOptions options;
  options.weights = args.text("--weights");
  options.out = args.text("--out");
  options.format = args.text("--format");
  options.prune = args.flag("--prune");
  options.dtype = parse_precision(args.text("--dtype"), "--dtype");
  options.shard_mb = args.real("--shard-mb");
  export_command(context.world, options, context.log);
  return 0;
}

}  // namespace trellis
