// Shard file names and the expansion of `data.train = data/fmnist/train-*.h5` into files.
//
// A dataset split into K files is named <stem>-00000-of-0000K.h5 ... <stem>-(K-1)-of-0000K.h5
// (five digits, like TFRecord / WebDataset shards), so a sorted glob lists them in order and
// a missing or stale shard is detectable from the names alone.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace trellis {

// "<stem>-<index>-of-<count>.h5" with both numbers zero-padded to five digits.
std::string shard_file_name(const std::string& stem, int index, int count);

// Expands one spec on this process: a plain path is returned as is; a spec with * ? or [ is
// globbed and sorted by byte order. Throws InputError when a glob matches nothing, or when
// files named like shards of one stem do not form one complete set 0..K-1 (a missing shard,
// or leftovers of an earlier split into a different K).
std::vector<std::string> expand_data_spec(const std::string& spec);

// What every rank of comm uses: rank 0 expands each spec (in the order given, concatenating)
// and checks that every file exists, then broadcasts the list, so a thousand ranks do not
// glob the parallel file system and all ranks see the same list. Collective over comm; when
// rank 0 finds a problem, every rank throws the same InputError.
std::vector<std::string> resolve_data_files(const std::vector<std::string>& specs, MPI_Comm comm);

}  // namespace trellis
