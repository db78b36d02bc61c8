// Final model weights as HDF5 ("trellis.weights", version 1): one float32 dataset per
// parameter, /params/<name>, in its logical shape, one per non-trainable model buffer (BatchNorm
// running statistics), /buffers/<name>, and the resolved configuration (INI text) as the root
// attribute `config`, so `trellis eval` can rebuild the model from the file alone. A language
// model trained on BPE tokens also keeps its tokenizer, /tokenizer_json (data/tokenizer_blob.hpp),
// so `trellis generate` encodes and decodes text without the data.
//
// Written into "<path>.tmp", fsynced, renamed over <path> and the directory fsynced
// (core/durable_file.hpp), so an interrupted write or a crash never leaves a half-written file
// under the final name.
#pragma once

#include "trellis/data/hdf5.hpp"
#include "trellis/data/hdf5_tuning.hpp"
#include "trellis/train/files/tensor_piece.hpp"

#include <mpi.h>

#include "trellis/nn/model.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <set>
#include <string>

namespace trellis {

inline constexpr const char* kWeightsFormat = "trellis.weights";
inline constexpr int kWeightsFormatVersion = 1;

// Collective over comm: writes the weights file with the parallel tensor-file writer of
// checkpoints (train/tensor_file.hpp), each rank writing its pieces; no rank gathers. pieces:
// named by dataset path, "params/<name>" and "buffers/<name>" (float32, logical shape; the
// buffers 1-D), built like a checkpoint's (one writer per element, ranks may pass different
// lists); each dataset also gets a "checksum" attribute. Every rank returns after the file is
// published durably; throws the same error on every rank (the .tmp file removed).
// tokenizer_json: written as /tokenizer_json when not empty.
void write_weights_file(const std::string& path, const std::vector<TensorPiece>& pieces,
                        const std::string& config_ini, MPI_Comm comm,
                        const Hdf5Tuning& tuning = Hdf5Tuning{},
                        const std::string& tokenizer_json = "");

// Collective over comm: reads each rank's pieces of a weights file ("params/<name>" and
// "buffers/<name>", logical shapes and shard specs as write_weights_file takes them) with the
// parallel tensor-file reader, whatever layout wrote the file: the tensors are whole logical
// ones, so a run on another tp/pp/dp layout reads its own pieces of them (init.weights).
// Throws the same InputError on every rank, naming the file and tensor.
void read_weights_pieces(const std::string& path, const std::vector<TensorPiece>& pieces,
                         MPI_Comm comm, const Hdf5Tuning& tuning = Hdf5Tuning{});

// Opens a weights file for reading after checking its format; InputError naming the file.
H5File open_weights_file(const std::string& path);
// Writes the root attributes of a weights file (format, version, config), and the tokenizer.
void write_weights_root(hid_t file, const std::string& config_ini,
                        const std::string& tokenizer_json = "");

// The `config` attribute of a weights file. Throws InputError naming the file.
std::string read_weights_config(const std::string& path);

// The shape of dataset `name` ("params/head.weight") of a weights file; InputError naming the
// file when it is missing.
Shape read_weights_shape(const std::string& path, const std::string& name);

// Loads every parameter of `store` (finalized) by name, but those in `skip` (the weights an
// int8 file holds quantized); throws InputError naming the file and parameter when one is
// missing or has another shape.
void load_weights(const std::string& path, nn::ParameterStore& store,
                  const std::vector<nn::NamedBuffer>& buffers,
                  const std::set<std::string>& skip = {});

}  // namespace trellis
