// One staged file and its record (data.stage, staging.hpp): the copy <dir>/<name> of <source>,
// and the sidecar <dir>/.<name>.source that says what it was copied from, so that a later job
// reuses the copy only while it is still a faithful copy of the source as it is now. Both the
// sidecar and the copy's temporary <dir>/.<name>.partial are hidden: no shard glob of the
// directory ("train-*", "*") matches a leading dot.
//
// Sidecar (text, one "key value" per line):
//   trellis-staged-copy 1
//   source <source path, as given>
//   source_size <bytes>
//   source_mtime_ns <st_mtim in ns>
//   hash <16 hex digits: ContentHash of the bytes copied>
//   staged_size <bytes>
//   staged_mtime_ns <the copy's st_mtim in ns after the rename>
// Reuse needs every field to match: the same source path, size and mtime (the source was not
// replaced or edited), the copy's size and mtime (nobody touched it), and the copy's content
// hash (re-read from node-local storage, so even an edit that kept the mtime is caught).
// Anything else, a missing or unreadable sidecar included, means a new copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace trellis {

// A fast non-cryptographic 64-bit hash of a byte stream, fed in pieces of any size (the result
// depends only on the bytes, not on how they were split). Catches edits, not attacks.
class ContentHash {
 public:
  void update(const char* data, std::size_t n);
  std::uint64_t digest() const;  // of everything fed so far

 private:
  void mix(std::uint64_t word);
  std::uint64_t state_ = 0x9e3779b97f4a7c15ull;
  std::uint64_t length_ = 0;
  unsigned char pending_[8] = {};  // the bytes of an incomplete word
  std::size_t pending_size_ = 0;
};

// <dir>/.<name>.source for target <dir>/<name>.
std::string staged_record_path(const std::string& target);

// Copies source to target (through a hidden .partial file and a rename, so a half-copied file never
// looks staged), hashing while copying, then writes its record. Throws std::runtime_error
// naming the file on any I/O failure.
void copy_and_record(const std::string& source, const std::string& target);

// Whether target is, per its sidecar, an intact copy of source as source is now (see above).
bool staged_copy_is_current(const std::string& source, const std::string& target);

}  // namespace trellis
