#include "trellis/nn/buffer_pool.hpp"

#include <utility>

namespace trellis::nn {

namespace {

thread_local SharedBufferScope* current_scope = nullptr;

}  // namespace

FloatView& BufferPool::slot(std::size_t index, std::size_t floats) {
  if (index >= slots_.size()) slots_.resize(index + 1);
  FloatView& s = slots_[index];
  if (s.extent(0) < floats) {
    if (s.extent(0) > 0) outgrown_.push_back(s);
    s = FloatView(label_ + std::to_string(index), floats);
  }
  return s;
}

FloatView BufferPool::floats(std::size_t index, std::size_t floats) {
  return Kokkos::subview(slot(index, floats), std::make_pair(std::size_t{0}, floats));
}

kernels::HalfView BufferPool::halves(std::size_t index, std::size_t count) {
  FloatView& s = slot(index, (count + 1) / 2);
  return kernels::HalfView(reinterpret_cast<std::uint16_t*>(s.data()), count);
}

std::int64_t BufferPool::bytes() const {
  std::int64_t total = 0;
  for (const FloatView& s : slots_) total += static_cast<std::int64_t>(s.extent(0) * sizeof(float));
  return total;
}

SharedBufferScope::SharedBufferScope(BufferPool* saved, BufferPool* scratch)
    : saved_(saved), scratch_(scratch), previous_(current_scope) {
  current_scope = this;
}

SharedBufferScope::~SharedBufferScope() { current_scope = previous_; }

FloatView SharedBufferScope::take(BufferRole role, std::size_t floats) {
  return pool(role)->floats(next(role)++, floats);
}

kernels::HalfView SharedBufferScope::take_halves(BufferRole role, std::size_t count) {
  return pool(role)->halves(next(role)++, count);
}

FloatView layer_buffer(BufferRole role, const std::string& label, std::size_t floats) {
  if (current_scope != nullptr && current_scope->shares(role))
    return current_scope->take(role, floats);
  return FloatView(label, floats);
}

kernels::HalfView layer_half_buffer(BufferRole role, const std::string& label, std::size_t count) {
  if (current_scope != nullptr && current_scope->shares(role))
    return current_scope->take_halves(role, count);
  return kernels::HalfView(label, count);
}

}  // namespace trellis::nn
