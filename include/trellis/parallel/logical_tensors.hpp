// Whole (logical) parameter tensors from a tensor-parallel model, for files that must not
// depend on the layout that wrote them (model.h5 now, checkpoints next).
//
// A sharded parameter's pieces are all-gathered over the tp group and put back in logical
// order: the gathered [parts][outer, sections, piece, inner] becomes
// [outer, sections, parts, piece, inner] (see ShardSpec and kernels::ShardIndexMap).
#pragma once

#include "trellis/comm/communicator.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/core/shape.hpp"
#include "trellis/core/tensor_list_codec.hpp"
#include "trellis/nn/parameter_store.hpp"

#include <string>
#include <vector>

namespace trellis {

// HostTensor (name, logical shape, row-major values): core/tensor_list_codec.hpp.

// Collective over tp (every rank of the group, same store layout): every parameter as its
// logical tensor, on every rank of the group. Allocates; not for the training step.
std::vector<HostTensor> logical_parameters(const nn::ParameterStore& store, Communicator& tp);

// Collective over pp: every stage's tensors (skip: names a stage holds as a copy of another
// stage's, not sent) gathered on pp rank 0 in stage order; other ranks get an empty list.
std::vector<HostTensor> gather_stages(std::vector<HostTensor> mine, const MpiComm& pp,
                                      const std::vector<std::string>& skip);

// Puts tp pieces, gathered back to back, in logical order. Exposed for unit tests.
std::vector<float> unshard(const std::vector<float>& gathered, const nn::ParamInfo& info);

}  // namespace trellis
