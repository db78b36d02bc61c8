// TokenShard: one opened and validated "trellis.tokens" file (format in token_dataset.hpp).
// TokenDataset opens one per file of a dataset and checks that they agree.
#pragma once

#include "trellis/data/hdf5.hpp"
#include "trellis/data/token_format.hpp"

#include <cstdint>
#include <string>

namespace trellis {

struct TokenShard {
  std::string path;
  H5File file;     // declared before the dataset so that it is closed after it
  H5Dataset data;  // /tokens
  H5Space space;   // file dataspace of /tokens, re-selected by every read
  std::int64_t tokens = 0;
  TokenFileSpec spec;  // as declared by the file (chunk_tokens: 0, not read)
};

// Opens `path` with the file access list `fapl` (collective when it is an MPI-IO list) and
// checks attributes, dtype and rank. Throws InputError "<path>: <attribute or dataset>:
// expected ..., found ..." for any violation, and for files HDF5 cannot open.
TokenShard open_token_shard(const std::string& path, hid_t fapl, hid_t dapl);

}  // namespace trellis
