#include "trellis/core/tensor_list_codec.hpp"

#include "trellis/core/error.hpp"

#include <cstdint>
#include <cstring>

namespace trellis {

namespace {

void append(std::string& out, const void* data, std::size_t size) {
  out.append(static_cast<const char*>(data), size);
}

void append_u64(std::string& out, std::uint64_t value) { append(out, &value, sizeof value); }

// Reads records from a byte string, checking every length against what is left.
class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  bool done() const { return at_ == bytes_.size(); }

  void take(void* to, std::size_t size) {
    TRELLIS_REQUIRE(size <= bytes_.size() - at_, "truncated tensor list");
    std::memcpy(to, bytes_.data() + at_, size);
    at_ += size;
  }
  std::uint64_t u64() {
    std::uint64_t value = 0;
    take(&value, sizeof value);
    return value;
  }
  // A count of `element_size`-byte items that must fit in the rest of the bytes.
  std::size_t count(std::size_t element_size) {
    const std::uint64_t n = u64();
    TRELLIS_REQUIRE(n <= (bytes_.size() - at_) / element_size, "truncated tensor list");
    return static_cast<std::size_t>(n);
  }

 private:
  const std::string& bytes_;
  std::size_t at_ = 0;
};

}  // namespace

void encode_tensor(std::string& out, const std::string& name, const Shape& shape,
                   const float* values, std::size_t count) {
  append_u64(out, name.size());
  out += name;
  append_u64(out, shape.size());
  append(out, shape.data(), shape.size() * sizeof(std::int64_t));
  append_u64(out, count);
  if (count > 0) append(out, values, count * sizeof(float));
}

std::string encode_tensors(const std::vector<HostTensor>& tensors) {
  std::string out;
  for (const HostTensor& t : tensors)
    encode_tensor(out, t.name, t.shape, t.values.data(), t.values.size());
  return out;
}

std::vector<HostTensor> decode_tensors(const std::string& bytes) {
  std::vector<HostTensor> tensors;
  Reader in(bytes);
  while (!in.done()) {
    HostTensor t;
    t.name.resize(in.count(1));
    in.take(t.name.data(), t.name.size());
    t.shape.resize(in.count(sizeof(std::int64_t)));
    in.take(t.shape.data(), t.shape.size() * sizeof(std::int64_t));
    t.values.resize(in.count(sizeof(float)));
    in.take(t.values.data(), t.values.size() * sizeof(float));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace trellis
