#include "trellis/kernels/conv_onednn.hpp"

#if TRELLIS_HAVE_ONEDNN

#include "trellis/core/cpu_features.hpp"
#include "trellis/core/error.hpp"

#include <dnnl.hpp>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

namespace trellis::kernels {

namespace {

using Tag = dnnl::memory::format_tag;
using Dims = dnnl::memory::dims;

// Every C-API status goes through here; the C++ API's constructors throw dnnl::error instead,
// which the constructor below converts.
void check(dnnl_status_t status, const char* call, const std::string& what) {
  if (status != dnnl_success) {
    throw Error(std::string("oneDNN ") + call + " failed with status " +
                std::to_string(static_cast<int>(status)) + " for the convolution " + what);
  }
}

// One tensor as Trellis holds it (plain NCHW / OIHW, its buffer set per call) and as the
// primitive wants it, with the reorders between them when the two layouts differ.
struct Staged {
  dnnl::memory user;   // plain layout, no buffer of its own
  dnnl::memory inner;  // the primitive's layout: `user` itself when the layouts agree
  dnnl::reorder to_inner, to_user;
  bool same = true;

  Staged() = default;
  Staged(const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
         const dnnl::engine& engine, bool into_primitive)
      : user(plain, engine, DNNL_MEMORY_NONE), same(plain == wanted) {
    if (same) {
      inner = user;
      return;
    }
    inner = dnnl::memory(wanted, engine);  // allocated once, here
    if (into_primitive) {
      to_inner = dnnl::reorder(user, inner);
    } else {
      to_user = dnnl::reorder(inner, user);
    }
  }
};

// Runs a primitive with a fixed argument list: the C API takes an array, so nothing is
// allocated (the C++ execute() builds an unordered_map per call).
void execute(const dnnl::primitive& p, const dnnl::stream& stream,
             std::initializer_list<std::pair<int, const dnnl::memory*>> args, const char* call,
             const std::string& what) {
  dnnl_exec_arg_t array[6];
  int count = 0;
  for (const auto& [id, memory] : args) array[count++] = {id, memory->get()};
  check(dnnl_primitive_execute(p.get(), stream.get(), count, array), call, what);
}

void reorder(const dnnl::reorder& r, const dnnl::memory& from, const dnnl::memory& to,
             const dnnl::stream& stream, const std::string& what) {
  execute(r, stream, {{DNNL_ARG_FROM, &from}, {DNNL_ARG_TO, &to}}, "reorder", what);
}

void set_buffer(const dnnl::memory& m, const void* data) {
  m.set_data_handle(const_cast<void*>(data));  // oneDNN's API is not const-correct
}

// The format tag of activations in channel blocks of `block` (ChannelBlocks).
Tag activation_tag(int block) {
  switch (block) {
    case 1:
      return Tag::nchw;
    case 4:
      return Tag::nChw4c;
    case 8:
      return Tag::nChw8c;
    case 16:
      return Tag::nChw16c;
    default:
      throw Error("onednn conv: no oneDNN layout for channel blocks of " + std::to_string(block) +
                  " (expected 1, 4, 8 or 16)");
  }
}

}  // namespace

struct OnednnConvolution::Plan {
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
  Staged src, weights, dst;               // forward
  Staged diff_dst, weights_bd, diff_src;  // backward data
  Staged src_bw, diff_dst_bw;             // backward weights (may share the memories above)
  bool src_bw_from_forward = false, diff_dst_bw_from_bd = false;
  dnnl::memory diff_weights;  // the primitive's layout, written (=) by backward_weights
  dnnl::memory user_dw;       // OIHW, the gradient buffer (+= through the sum post-op)
  dnnl::reorder accumulate_dw;
  std::size_t scratchpad_bytes = 0;
  std::string implementation;
};

struct OnednnConvolution::State {
  ConvGeometry g;
  int out_channels = 0, capacity = 0;
  Precision operands = Precision::fp32;
  ChannelBlocks blocks;
  std::string what;  // the geometry, for errors
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<int, std::unique_ptr<Plan>> plans;  // by batch size
  dnnl::memory scratchpad;
  std::size_t scratchpad_bytes = 0;

  Plan& plan(int n) {
    TRELLIS_REQUIRE(n > 0 && n <= capacity, "onednn conv " + what + ": batch " + std::to_string(n) +
                                                " outside [1, capacity " +
                                                std::to_string(capacity) + "]");
    auto found = plans.find(n);
    if (found != plans.end()) return *found->second;
    try {
      auto made = build(n);
      Plan& p = *made;
      plans.emplace(n, std::move(made));
      if (p.scratchpad_bytes > scratchpad_bytes || !scratchpad) {
        scratchpad_bytes = std::max<std::size_t>(p.scratchpad_bytes, 1);
        scratchpad = dnnl::memory({{static_cast<dnnl::memory::dim>(scratchpad_bytes)},
                                   dnnl::memory::data_type::u8,
                                   Tag::x},
                                  engine);
      }
      return p;
    } catch (const dnnl::error& e) {
      throw Error("oneDNN convolution " + what + ", batch " + std::to_string(n) + ": " + e.what() +
                  " (status " + std::to_string(static_cast<int>(e.status)) + ")");
    }
  }

  std::unique_ptr<Plan> build(int n) const {
    using dnnl::algorithm;
    using dnnl::prop_kind;
    const auto f32 = dnnl::memory::data_type::f32;
    // What the primitives read (x, w, dy); what they write (y, dx, dw) is always fp32. (bf16
    // y and dx, rounded by the primitive instead of a pass of the layer, measured no faster on
    // the CNN: the bf16 -> fp32 NCHW reorders cost what the rounding pass saved.)
    const auto op = operands == Precision::bf16 ? dnnl::memory::data_type::bf16 : f32;
    const Dims src{n, g.channels, g.height, g.width};
    const Dims wei{out_channels, g.channels, g.kernel, g.kernel};
    const Dims dst{n, out_channels, g.out_height(), g.out_width()};
    const Dims strides{g.stride, g.stride}, padding{g.padding, g.padding};
    const dnnl::memory::desc any_src(src, op, Tag::any), any_wei(wei, op, Tag::any),
        any_dst(dst, f32, Tag::any), any_dy(dst, op, Tag::any), any_dx(src, f32, Tag::any),
        any_dw(wei, f32, Tag::any);
    // Trellis' own buffers: activations and gradients fp32 in the caller's layouts, weights
    // in the operand format.
    const dnnl::memory::desc plain_src(src, f32, activation_tag(blocks.input)),
        plain_wei(wei, op, Tag::oihw), plain_dst(dst, f32, activation_tag(blocks.output)),
        plain_dw(wei, f32, Tag::oihw);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

    const dnnl::convolution_forward::primitive_desc fwd_pd(
        dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                        any_src, any_wei, any_dst, strides, padding, padding),
        attr, engine);
    const dnnl::convolution_backward_data::primitive_desc bd_pd(
        dnnl::convolution_backward_data::desc(algorithm::convolution_direct, any_dx, any_wei,
                                              any_dy, strides, padding, padding),
        attr, engine, fwd_pd);
    const dnnl::convolution_backward_weights::primitive_desc bw_pd(
        dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, any_src, any_dw,
                                                 any_dy, strides, padding, padding),
        attr, engine, fwd_pd);

    auto p = std::make_unique<Plan>();
    p->forward = dnnl::convolution_forward(fwd_pd);
    p->backward_data = dnnl::convolution_backward_data(bd_pd);
    p->backward_weights = dnnl::convolution_backward_weights(bw_pd);
    p->src = Staged(plain_src, fwd_pd.src_desc(), engine, true);
    p->weights = Staged(plain_wei, fwd_pd.weights_desc(), engine, true);
    p->dst = Staged(plain_dst, fwd_pd.dst_desc(), engine, false);
    p->diff_dst = Staged(plain_dst, bd_pd.diff_dst_desc(), engine, true);
    p->weights_bd = Staged(plain_wei, bd_pd.weights_desc(), engine, true);
    p->diff_src = Staged(plain_src, bd_pd.diff_src_desc(), engine, false);
    // The weight gradient reads x and dy again: reuse the forward's reordered x (the layer
    // keeps x unchanged until backward) and backward-data's reordered dy when the layouts agree.
    p->src_bw_from_forward = bw_pd.src_desc() == fwd_pd.src_desc();
    p->diff_dst_bw_from_bd = bw_pd.diff_dst_desc() == bd_pd.diff_dst_desc();
    if (!p->src_bw_from_forward) p->src_bw = Staged(plain_src, bw_pd.src_desc(), engine, true);
    if (!p->diff_dst_bw_from_bd) {
      p->diff_dst_bw = Staged(plain_dst, bw_pd.diff_dst_desc(), engine, true);
    }
    p->diff_weights = dnnl::memory(bw_pd.diff_weights_desc(), engine);
    p->user_dw = dnnl::memory(plain_dw, engine, DNNL_MEMORY_NONE);
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    dnnl::primitive_attr accumulate;
    accumulate.set_post_ops(sum);
    p->accumulate_dw = dnnl::reorder(dnnl::reorder::primitive_desc(
        engine, bw_pd.diff_weights_desc(), engine, plain_dw, accumulate));
    p->scratchpad_bytes =
        std::max({fwd_pd.scratchpad_desc().get_size(), bd_pd.scratchpad_desc().get_size(),
                  bw_pd.scratchpad_desc().get_size()});
    p->implementation = std::string(fwd_pd.impl_info_str()) + " / " + bd_pd.impl_info_str() +
                        " / " + bw_pd.impl_info_str();
    return p;
  }
};

OnednnConvolution::OnednnConvolution(const ConvGeometry& g, int out_channels, int capacity,
                                     Precision operands, ChannelBlocks blocks)
    : state_(std::make_unique<State>()) {
  g.validate("onednn conv");
  TRELLIS_REQUIRE(out_channels > 0 && capacity > 0,
                  "onednn conv: out_channels and capacity must be positive");
  ChannelLayout(g.height * g.width, blocks.input).require_fits(g.channels, "onednn conv input");
  ChannelLayout(g.out_height() * g.out_width(), blocks.output)
      .require_fits(out_channels, "onednn conv output");
  activation_tag(blocks.input), activation_tag(blocks.output);  // throw for unknown blocks
  if (operands == Precision::fp16)
    throw Error("onednn conv " + g.describe() +
                ": oneDNN has no fp16 CPU convolution (fp16 autocast convolutions stay emulated)");
  state_->g = g;
  state_->operands = operands;
  state_->blocks = blocks;
  state_->out_channels = out_channels;
  state_->capacity = capacity;
  state_->what = g.describe() + " -> " + std::to_string(out_channels) + " channels, " +
                 precision_name(operands) + " operands";
  state_->plan(capacity);  // the full batch's primitives now, not in the first step
}

OnednnConvolution::~OnednnConvolution() = default;

std::string OnednnConvolution::implementation() const {
  return state_->plans.at(state_->capacity)->implementation;
}

Precision OnednnConvolution::operands() const { return state_->operands; }

int OnednnConvolution::activation_reorders() const {
  const Plan& p = *state_->plans.at(state_->capacity);
  int count = !p.src.same + !p.dst.same + !p.diff_dst.same + !p.diff_src.same;
  if (!p.src_bw_from_forward) count += !p.src_bw.same;
  if (!p.diff_dst_bw_from_bd) count += !p.diff_dst_bw.same;
  return count;
}

namespace {

// The layout oneDNN's forward convolution chooses for its output on a CNN-like shape (32 ->
// 32 channels, 3x3, 16x16 images), as a channel block.
int ask_preferred_block(Precision operands) {
  const auto f32 = dnnl::memory::data_type::f32;
  const auto op = operands == Precision::bf16 ? dnnl::memory::data_type::bf16 : f32;
  const Dims act{8, 32, 16, 16}, wei{32, 32, 3, 3}, unit{1, 1};
  try {
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
            dnnl::memory::desc(act, op, Tag::any), dnnl::memory::desc(wei, op, Tag::any),
            dnnl::memory::desc(act, f32, Tag::any), unit, unit, unit),
        engine);
    for (const int block : {16, 8, 4}) {
      if (pd.dst_desc() == dnnl::memory::desc(act, f32, activation_tag(block))) return block;
    }
  } catch (const dnnl::error&) {
    // No convolution for these operands here (bf16 without AVX-512): NCHW, as for no oneDNN.
  }
  return 1;
}

}  // namespace

int OnednnConvolution::preferred_channel_block(Precision operands) {
  if (operands == Precision::bf16) {
    static const int bf16_block = ask_preferred_block(Precision::bf16);
    return bf16_block;
  }
  static const int fp32_block = ask_preferred_block(Precision::fp32);
  return fp32_block;
}

bool OnednnConvolution::bf16_available() {
  const CpuFeatures& cpu = host_cpu_features();
  return cpu.avx512_bf16 || cpu.amx_bf16;
}

void OnednnConvolution::forward(ConstMatrix x, int n, ConstVector w, Matrix y) {
  TRELLIS_REQUIRE(state_->operands == Precision::fp32,
                  "onednn conv " + state_->what + ": fp32 weights given");
  run_forward(x, n, w.data(), y);
}

void OnednnConvolution::forward(ConstMatrix x, int n, ConstHalfVector w, Matrix y) {
  TRELLIS_REQUIRE(state_->operands == Precision::bf16,
                  "onednn conv " + state_->what + ": 16-bit weights given");
  run_forward(x, n, w.data(), y);
}

void OnednnConvolution::backward(ConstMatrix x, ConstMatrix dy, int n, ConstVector w, Vector dw,
                                 Matrix dx) {
  TRELLIS_REQUIRE(state_->operands == Precision::fp32,
                  "onednn conv " + state_->what + ": fp32 weights given");
  run_backward(x, dy, n, w.data(), dw, dx);
}

void OnednnConvolution::backward(ConstMatrix x, ConstMatrix dy, int n, ConstHalfVector w, Vector dw,
                                 Matrix dx) {
  TRELLIS_REQUIRE(state_->operands == Precision::bf16,
                  "onednn conv " + state_->what + ": 16-bit weights given");
  run_backward(x, dy, n, w.data(), dw, dx);
}

void OnednnConvolution::run_forward(ConstMatrix x, int n, const void* w, Matrix y) {
  if (n == 0) return;
  State& s = *state_;
  Plan& p = s.plan(n);
  set_buffer(p.src.user, x.data());
  set_buffer(p.weights.user, w);
  set_buffer(p.dst.user, y.data());
  if (!p.src.same) reorder(p.src.to_inner, p.src.user, p.src.inner, s.stream, s.what);
  if (!p.weights.same) {
    reorder(p.weights.to_inner, p.weights.user, p.weights.inner, s.stream, s.what);
  }
  execute(p.forward, s.stream,
          {{DNNL_ARG_SRC, &p.src.inner},
           {DNNL_ARG_WEIGHTS, &p.weights.inner},
           {DNNL_ARG_DST, &p.dst.inner},
           {DNNL_ARG_SCRATCHPAD, &s.scratchpad}},
          "convolution forward", s.what);
  if (!p.dst.same) reorder(p.dst.to_user, p.dst.inner, p.dst.user, s.stream, s.what);
  s.stream.wait();
}

void OnednnConvolution::run_backward(ConstMatrix x, ConstMatrix dy, int n, const void* w, Vector dw,
                                     Matrix dx) {
  if (n == 0) return;
  State& s = *state_;
  Plan& p = s.plan(n);
  set_buffer(p.diff_dst.user, dy.data());
  if (!p.diff_dst.same) {
    reorder(p.diff_dst.to_inner, p.diff_dst.user, p.diff_dst.inner, s.stream, s.what);
  }
  if (dx.data() != nullptr) {
    set_buffer(p.weights_bd.user, w);
    set_buffer(p.diff_src.user, dx.data());
    if (!p.weights_bd.same) {
      reorder(p.weights_bd.to_inner, p.weights_bd.user, p.weights_bd.inner, s.stream, s.what);
    }
    execute(p.backward_data, s.stream,
            {{DNNL_ARG_DIFF_DST, &p.diff_dst.inner},
             {DNNL_ARG_WEIGHTS, &p.weights_bd.inner},
             {DNNL_ARG_DIFF_SRC, &p.diff_src.inner},
             {DNNL_ARG_SCRATCHPAD, &s.scratchpad}},
            "convolution backward data", s.what);
    if (!p.diff_src.same) {
      reorder(p.diff_src.to_user, p.diff_src.inner, p.diff_src.user, s.stream, s.what);
    }
  }
  const dnnl::memory* src = &p.src.inner;
  if (!p.src_bw_from_forward) {
    set_buffer(p.src_bw.user, x.data());
    if (!p.src_bw.same) reorder(p.src_bw.to_inner, p.src_bw.user, p.src_bw.inner, s.stream, s.what);
    src = &p.src_bw.inner;
  } else if (p.src.same) {
    set_buffer(p.src.user, x.data());  // plain layout: the forward read x in place
  }
  const dnnl::memory* diff_dst = &p.diff_dst.inner;
  if (!p.diff_dst_bw_from_bd) {
    set_buffer(p.diff_dst_bw.user, dy.data());
    if (!p.diff_dst_bw.same) {
      reorder(p.diff_dst_bw.to_inner, p.diff_dst_bw.user, p.diff_dst_bw.inner, s.stream, s.what);
    }
    diff_dst = &p.diff_dst_bw.inner;
  }
  execute(p.backward_weights, s.stream,
          {{DNNL_ARG_SRC, src},
           {DNNL_ARG_DIFF_DST, diff_dst},
           {DNNL_ARG_DIFF_WEIGHTS, &p.diff_weights},
           {DNNL_ARG_SCRATCHPAD, &s.scratchpad}},
          "convolution backward weights", s.what);
  set_buffer(p.user_dw, dw.data());
  reorder(p.accumulate_dw, p.diff_weights, p.user_dw, s.stream, s.what);
  s.stream.wait();
}

}  // namespace trellis::kernels

#endif
