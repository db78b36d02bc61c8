#include "trellis/nn/buffer_pool.hpp"

#include <utility>

namespace trellis::nn {

namespace {

thread_local SharedBufferScope* current_scope = nullptr;
thread_local MemoryLedger* current_census = nullptr;

}  // namespace

BufferCensus::BufferCensus(MemoryLedger& census) : previous_(current_census) {
  current_census = &census;
}

BufferCensus::~BufferCensus() { current_census = previous_; }

MemoryLedger* BufferCensus::active() { return current_census; }

FloatView& BufferPool::slot(std::size_t index, std::size_t floats) {
  if (index >= slots_.size()) {
    slots_.resize(index + 1);
    sizes_.resize(index + 1, 0);
  }
  FloatView& s = slots_[index];
  if (sizes_[index] < floats) {
    // Blocks built earlier keep the smaller slot: it stays allocated (and counted).
    if (s.extent(0) > 0) outgrown_.push_back(s);
    sizes_[index] = floats;
    const std::string label = label_ + std::to_string(index);
    if (MemoryLedger* census = current_census) {
      census->allocated(label, static_cast<std::int64_t>(floats * sizeof(float)));
      s = FloatView();
    } else {
      s = FloatView(label, floats);
    }
  }
  return s;
}

FloatView BufferPool::floats(std::size_t index, std::size_t floats) {
  FloatView& s = slot(index, floats);
  if (s.extent(0) == 0) return FloatView();  // sized under a census
  return Kokkos::subview(s, std::make_pair(std::size_t{0}, floats));
}

kernels::HalfView BufferPool::halves(std::size_t index, std::size_t count) {
  FloatView& s = slot(index, (count + 1) / 2);
  if (s.extent(0) == 0) return kernels::HalfView();
  return kernels::HalfView(reinterpret_cast<std::uint16_t*>(s.data()), count);
}

std::int64_t BufferPool::bytes() const {
  std::int64_t total = 0;
  for (std::size_t size : sizes_) total += static_cast<std::int64_t>(size * sizeof(float));
  return total;
}

SharedBufferScope::SharedBufferScope(BufferPool* saved, BufferPool* scratch, BufferPool* cheap,
                                     BufferPool* transient)
    : saved_(saved),
      scratch_(scratch),
      cheap_(cheap),
      transient_(transient),
      previous_(current_scope) {
  current_scope = this;
}

BufferPool* SharedBufferScope::pool(BufferRole role) const {
  switch (role) {
    case BufferRole::saved:
      return saved_;
    case BufferRole::scratch:
      return scratch_;
    case BufferRole::cheap:
      return cheap_ != nullptr ? cheap_ : saved_;
    case BufferRole::transient:
      return transient_ != nullptr ? transient_ : scratch_;
    case BufferRole::own:
      break;
  }
  return nullptr;
}

std::size_t& SharedBufferScope::next(BufferRole role) {
  if (role == BufferRole::cheap && cheap_ != nullptr) return cheap_next_;
  if (role == BufferRole::transient && transient_ != nullptr) return transient_next_;
  if (role == BufferRole::transient) return scratch_next_;
  return role == BufferRole::scratch ? scratch_next_ : saved_next_;
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
  if (current_census != nullptr) {
    current_census->allocated(label, static_cast<std::int64_t>(floats * sizeof(float)));
    return FloatView();
  }
  return FloatView(label, floats);
}

kernels::HalfView layer_half_buffer(BufferRole role, const std::string& label, std::size_t count) {
  if (current_scope != nullptr && current_scope->shares(role))
    return current_scope->take_halves(role, count);
  if (current_census != nullptr) {
    current_census->allocated(label, static_cast<std::int64_t>(count * sizeof(std::uint16_t)));
    return kernels::HalfView();
  }
  return kernels::HalfView(label, count);
}

}  // namespace trellis::nn
