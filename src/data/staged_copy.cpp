#include "trellis/data/staged_copy.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace trellis {

namespace {

constexpr std::size_t kChunkBytes = std::size_t{4} << 20;

struct FileIdentity {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

[[noreturn]] void fail_io(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

FileIdentity identity_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) fail_io("cannot stat", path);
  return {static_cast<std::uint64_t>(info.st_size),
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_file(const std::string& path, const char* mode) {
  File f(std::fopen(path.c_str(), mode));
  if (!f) fail_io("cannot open", path);
  return f;
}

// Streams `from` through the hash, and into `to` when given.
std::uint64_t hash_file(const std::string& from, const std::string* to) {
  File in = open_file(from, "rb");
  File out = to ? open_file(*to, "wb") : nullptr;
  std::vector<char> buffer(kChunkBytes);  // [kChunkBytes] bytes of the file
  ContentHash hash;
  for (;;) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), in.get());
    if (n == 0 && std::ferror(in.get())) fail_io("cannot read", from);
    if (n == 0) break;
    hash.update(buffer.data(), n);
    if (out && std::fwrite(buffer.data(), 1, n, out.get()) != n) fail_io("cannot write", *to);
  }
  if (out && std::fclose(out.release()) != 0) fail_io("cannot write", *to);
  return hash.digest();
}

// A hidden name next to target: no shard glob ("train-*", "*") matches a leading dot.
std::string hidden_next_to(const std::string& target, const char* suffix) {
  const std::filesystem::path path(target);
  return (path.parent_path() / ("." + path.filename().string() + suffix)).string();
}

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

std::string staged_record_path(const std::string& target) {
  return hidden_next_to(target, ".source");
}

void ContentHash::mix(std::uint64_t word) {
  state_ ^= rotl(word * 0x87c37b91114253d5ull, 31) * 0x4cf5ad432745937full;
  state_ = rotl(state_, 27) * 5 + 0x52dce729;
}

void ContentHash::update(const char* data, std::size_t n) {
  length_ += n;
  while (n > 0 && (pending_size_ > 0 || n < 8)) {  // finish or extend a partial word
    pending_[pending_size_++] = static_cast<unsigned char>(*data++);
    --n;
    if (pending_size_ == 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, pending_, 8);
      mix(word);
      pending_size_ = 0;
    }
  }
  for (; n >= 8; n -= 8, data += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, data, 8);
    mix(word);
  }
  std::memcpy(pending_, data, n);  // n < 8 here; pending_ is empty when we get here with n > 0
  pending_size_ += n;
}

std::uint64_t ContentHash::digest() const {
  std::uint64_t tail = 0;
  std::memcpy(&tail, pending_, pending_size_);
  std::uint64_t h = state_ ^ rotl(tail * 0x87c37b91114253d5ull, 31) ^ length_;
  h ^= h >> 33;  // final avalanche (MurmurHash3's fmix64)
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

void copy_and_record(const std::string& source, const std::string& target) {
  namespace fs = std::filesystem;
  const std::string sidecar = staged_record_path(target);
  fs::remove(sidecar);  // a crash below leaves no record, hence a new copy next time
  const FileIdentity before = identity_of(source);
  const std::string partial = hidden_next_to(target, ".partial");
  const std::uint64_t hash = hash_file(source, &partial);
  fs::rename(partial, target);
  const FileIdentity staged = identity_of(target);
  const FileIdentity after = identity_of(source);
  if (after.size != before.size || after.mtime_ns != before.mtime_ns)
    throw std::runtime_error(source + " changed while it was being staged");
  std::ostringstream record;
  record << "trellis-staged-copy 1\nsource " << source << "\nsource_size " << before.size
         << "\nsource_mtime_ns " << before.mtime_ns << "\nhash " << std::hex << hash << std::dec
         << "\nstaged_size " << staged.size << "\nstaged_mtime_ns " << staged.mtime_ns << "\n";
  const std::string sidecar_partial = sidecar + ".partial";
  {
    std::ofstream out(sidecar_partial, std::ios::trunc);
    out << record.str();
    out.close();
    if (!out) fail_io("cannot write", sidecar_partial);
  }
  fs::rename(sidecar_partial, sidecar);
}

bool staged_copy_is_current(const std::string& source, const std::string& target) {
  std::ifstream in(staged_record_path(target));
  if (!in) return false;
  std::map<std::string, std::string> fields;  // key -> the rest of its line
  std::string line;
  while (std::getline(in, line)) {
    const auto space = line.find(' ');
    if (space != std::string::npos) fields[line.substr(0, space)] = line.substr(space + 1);
  }
  if (fields["trellis-staged-copy"] != "1" || fields["source"] != source) return false;
  try {
    const FileIdentity now = identity_of(source);
    const FileIdentity copy = identity_of(target);
    if (fields["source_size"] != std::to_string(now.size) ||
        fields["source_mtime_ns"] != std::to_string(now.mtime_ns) ||
        fields["staged_size"] != std::to_string(copy.size) ||
        fields["staged_mtime_ns"] != std::to_string(copy.mtime_ns))
      return false;
    std::ostringstream hash;
    hash << std::hex << hash_file(target, nullptr);
    return fields["hash"] == hash.str();
  } catch (const std::runtime_error&) {  // unreadable copy: copy again (the source's own
    return false;                        // problems surface there, with its name)
  }
}

}  // namespace trellis
