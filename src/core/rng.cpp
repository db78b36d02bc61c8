#include "trellis/core/rng.hpp"

namespace trellis {

std::uint64_t stream_from_name(const std::string& name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace trellis
