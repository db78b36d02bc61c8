#include "trellis/train/hf/hf_names.hpp"

#include "trellis/core/error.hpp"

#include <algorithm>

namespace trellis {

namespace {

using Values = std::vector<float>;

// The mappings of one model, built in registration order.
class MappingList {
 public:
  explicit MappingList(std::vector<HfMapping>& out) : out_(out) {}

  void copy(const std::string& param, const Shape& shape, const std::string& hf) {
    out_.push_back({param, shape, HfRule::copy, {{hf, shape}}, {}});
  }
  void transpose(const std::string& param, const Shape& shape, const std::string& hf) {
    out_.push_back({param, shape, HfRule::transpose, {{hf, {shape.at(1), shape.at(0)}}}, {}});
  }
  // A Linear ("name".weight [out, in] and, with biases, "name".bias [out]) copied or, for
  // GPT-2's Conv1D, transposed.
  void linear(const std::string& param, std::int64_t out, std::int64_t in, const std::string& hf,
              bool bias, bool conv1d) {
    if (conv1d)
      transpose(param + ".weight", {out, in}, hf + ".weight");
    else
      copy(param + ".weight", {out, in}, hf + ".weight");
    if (bias) copy(param + ".bias", {out}, hf + ".bias");
  }
  // One fused Linear from several: stacked rows (gate; up) or the q|k|v layout.
  void fused(const std::string& param, std::int64_t in, HfRule rule,
             const std::vector<std::pair<std::string, std::int64_t>>& parts, bool bias,
             const kernels::QkvLayout& qkv = {}) {
    std::int64_t rows = 0;
    for (const auto& part : parts) rows += part.second;
    for (const char* suffix : {".weight", ".bias"}) {
      const bool weight = suffix[1] == 'w';
      if (!weight && !bias) continue;
      HfMapping m{param + suffix, weight ? Shape{rows, in} : Shape{rows}, rule, {}, qkv};
      for (const auto& [name, part_rows] : parts)
        m.parts.push_back({name + suffix, weight ? Shape{part_rows, in} : Shape{part_rows}});
      out_.push_back(std::move(m));
    }
  }

 private:
  std::vector<HfMapping>& out_;
};

void gpt2_mappings(const nn::GptSpec& spec, MappingList& list) {
  const std::int64_t d = spec.d_model, f = nn::gpt_block_spec(spec, nullptr).ff_width();
  list.copy("wte.weight", {spec.vocab, d}, "transformer.wte.weight");
  list.copy("wpe.weight", {spec.seq_len, d}, "transformer.wpe.weight");
  for (int i = 0; i < spec.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i), hf = "transformer." + p;
    list.copy(p + ".ln_1.weight", {d}, hf + ".ln_1.weight");
    list.copy(p + ".ln_1.bias", {d}, hf + ".ln_1.bias");
    list.linear(p + ".attn.c_attn", 3 * d, d, hf + ".attn.c_attn", true, true);
    list.linear(p + ".attn.c_proj", d, d, hf + ".attn.c_proj", true, true);
    list.copy(p + ".ln_2.weight", {d}, hf + ".ln_2.weight");
    list.copy(p + ".ln_2.bias", {d}, hf + ".ln_2.bias");
    list.linear(p + ".mlp.c_fc", f, d, hf + ".mlp.c_fc", true, true);
    list.linear(p + ".mlp.c_proj", d, f, hf + ".mlp.c_proj", true, true);
  }
  list.copy("ln_f.weight", {d}, "transformer.ln_f.weight");
  list.copy("ln_f.bias", {d}, "transformer.ln_f.bias");
}

void llama_mappings(const nn::GptSpec& spec, MappingList& list) {
  const nn::BlockSpec block = nn::gpt_block_spec(spec, nullptr);
  const std::int64_t d = spec.d_model, f = block.ff_width(), hd = d / spec.n_head;
  const kernels::QkvLayout qkv{spec.n_head, block.kv_heads(), hd};
  list.copy("wte.weight", {spec.vocab, d}, "model.embed_tokens.weight");
  for (int i = 0; i < spec.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i), hf = "model.layers." + std::to_string(i);
    list.copy(p + ".ln_1.weight", {d}, hf + ".input_layernorm.weight");
    list.fused(p + ".attn.c_attn", d, HfRule::qkv_rows,
               {{hf + ".self_attn.q_proj", qkv.n_head * hd},
                {hf + ".self_attn.k_proj", qkv.n_kv_head * hd},
                {hf + ".self_attn.v_proj", qkv.n_kv_head * hd}},
               spec.bias, qkv);
    list.linear(p + ".attn.c_proj", d, d, hf + ".self_attn.o_proj", spec.bias, false);
    list.copy(p + ".ln_2.weight", {d}, hf + ".post_attention_layernorm.weight");
    list.fused(p + ".mlp.c_fc", d, HfRule::stack_rows,
               {{hf + ".mlp.gate_proj", f}, {hf + ".mlp.up_proj", f}}, spec.bias);
    list.linear(p + ".mlp.c_proj", d, f, hf + ".mlp.down_proj", spec.bias, false);
  }
  list.copy("ln_f.weight", {d}, "model.norm.weight");
  if (!spec.tied_head) list.copy("lm_head.weight", {spec.vocab, d}, "lm_head.weight");
}

// Rows of a tensor [rows, inner...] are blocks of `inner` consecutive values.
std::int64_t row_size(const Shape& shape) {
  std::int64_t inner = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) inner *= shape[i];
  return inner;
}

// For qkv_rows: the Trellis row where part `p`'s row `r` goes (q: 0, k: 1, v: 2).
std::int64_t qkv_row(const kernels::QkvLayout& qkv, std::size_t p, std::int64_t r) {
  const std::int64_t head = r / qkv.head_dim, within = r % qkv.head_dim;
  const std::int64_t first = p == 0 ? qkv.q_col(head) : p == 1 ? qkv.k_col(head) : qkv.v_col(head);
  return first + within;
}

// Calls f(part, row in part, row in the Trellis tensor) for every row of every part.
template <class F>
void for_each_row(const HfMapping& m, F f) {
  std::int64_t offset = 0;
  for (std::size_t p = 0; p < m.parts.size(); ++p) {
    const std::int64_t rows = m.parts[p].shape.empty() ? 1 : m.parts[p].shape[0];
    for (std::int64_t r = 0; r < rows; ++r)
      f(p, r, m.rule == HfRule::qkv_rows ? qkv_row(m.qkv, p, r) : offset + r);
    offset += rows;
  }
}

void check_size(const std::string& what, const Shape& shape, std::size_t size) {
  if (static_cast<std::int64_t>(size) != shape_numel(shape))
    throw Error(what + ": " + std::to_string(size) + " values for shape " + shape_string(shape));
}

}  // namespace

std::vector<HfMapping> hf_mappings(const nn::GptSpec& spec, HfArch arch) {
  std::vector<HfMapping> out;
  MappingList list(out);
  if (arch == HfArch::gpt2)
    gpt2_mappings(spec, list);
  else
    llama_mappings(spec, list);
  return out;
}

const char* hf_base_prefix(HfArch arch) { return arch == HfArch::gpt2 ? "transformer." : "model."; }

std::vector<std::vector<float>> split_to_hf(const HfMapping& m, const Values& value) {
  check_size(m.param, m.shape, value.size());
  std::vector<Values> parts;
  for (const HfPart& part : m.parts)
    parts.emplace_back(static_cast<std::size_t>(shape_numel(part.shape)));
  if (m.rule == HfRule::copy) {
    parts[0] = value;
  } else if (m.rule == HfRule::transpose) {
    const std::int64_t rows = m.shape[0], cols = m.shape[1];
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        parts[0][static_cast<std::size_t>(c * rows + r)] =
            value[static_cast<std::size_t>(r * cols + c)];
  } else {
    const std::int64_t inner = row_size(m.shape);
    for_each_row(m, [&](std::size_t p, std::int64_t r, std::int64_t row) {
      std::copy_n(value.begin() + row * inner, inner, parts[p].begin() + r * inner);
    });
  }
  return parts;
}

Values join_from_hf(const HfMapping& m, const std::vector<Values>& parts) {
  if (parts.size() != m.parts.size())
    throw Error(m.param + ": " + std::to_string(parts.size()) + " parts, expected " +
                std::to_string(m.parts.size()));
  for (std::size_t p = 0; p < parts.size(); ++p)
    check_size(m.parts[p].name, m.parts[p].shape, parts[p].size());
  if (m.rule == HfRule::copy) return parts[0];
  Values value(static_cast<std::size_t>(shape_numel(m.shape)));
  if (m.rule == HfRule::transpose) {
    const std::int64_t rows = m.shape[0], cols = m.shape[1];
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        value[static_cast<std::size_t>(r * cols + c)] =
            parts[0][static_cast<std::size_t>(c * rows + r)];
    return value;
  }
  const std::int64_t inner = row_size(m.shape);
  for_each_row(m, [&](std::size_t p, std::int64_t r, std::int64_t row) {
    std::copy_n(parts[p].begin() + r * inner, inner, value.begin() + row * inner);
  });
  return value;
}

}  // namespace trellis
