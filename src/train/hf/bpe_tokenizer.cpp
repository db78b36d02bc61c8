#include "trellis/train/hf/bpe_tokenizer.hpp"

#include "trellis/core/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>

namespace trellis {

namespace {

using json = nlohmann::json;

std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// The UTF-8 characters of a string, one per element.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool is_letter(unsigned char c) {
  return (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? true : c >= 0x80;
}
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_other(unsigned char c) { return !is_space(c) && !is_letter(c) && !is_digit(c); }

// GPT-2's pre-tokenization pattern (header), on bytes.
std::vector<std::string> pre_tokens(const std::string& s) {
  std::vector<std::string> out;
  const std::size_t n = s.size();
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  auto run = [&](std::size_t from, bool (*same)(unsigned char)) {
    while (from < n && same(at(from))) ++from;
    return from;
  };
  for (std::size_t i = 0; i < n;) {
    if (at(i) == '\'') {
      bool matched = false;
      for (const char* suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        const std::string part = std::string("'") + suffix;
        if (s.compare(i, part.size(), part) == 0) {
          out.push_back(part);
          i += part.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    const std::size_t start = i;
    const std::size_t j = at(i) == ' ' && i + 1 < n && !is_space(at(i + 1)) ? i + 1 : i;
    if (!is_space(at(j))) {
      bool (*kind)(unsigned char) = is_letter(at(j))  ? is_letter
                                    : is_digit(at(j)) ? is_digit
                                                      : is_other;
      i = run(j, kind);
    } else {
      const std::size_t end = run(i, [](unsigned char c) { return is_space(c); });
      // \s+(?!\S): a run before a word leaves its last character to the word.
      i = end < n && end - i > 1 ? end - 1 : end;
    }
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw InputError(where + ": " + what);
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(const std::string& text, const std::string& where) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    bad(where, std::string("not a tokenizer.json (") + e.what() + ")");
  }
  const json& model = doc.value("model", json::object());
  if (model.value("type", "") != "BPE")
    bad(where, "key model.type = " + model.value("type", std::string("(none)")) +
                   ": only byte-level BPE tokenizers are read");
  const json& pre = doc.value("pre_tokenizer", json());
  const bool byte_level =
      pre.is_object() && (pre.value("type", "") == "ByteLevel" ||
                          (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
                           !pre["pretokenizers"].empty() &&
                           pre["pretokenizers"].back().value("type", "") == "ByteLevel"));
  if (!byte_level) bad(where, "key pre_tokenizer: a ByteLevel pre-tokenizer is needed");
  BpeTokenizer t;
  // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for 256 + k.
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    t.byte_char_[b] = utf8(static_cast<std::uint32_t>(printable ? b : 256 + next++));
    t.char_byte_[t.byte_char_[b]] = static_cast<std::uint8_t>(b);
  }
  try {
    for (const auto& [token, id] : model.at("vocab").items()) {
      const auto i = id.get<std::int64_t>();
      if (i < 0 || i >= INT_MAX) bad(where, "key model.vocab: id " + std::to_string(i));
      if (static_cast<std::size_t>(i) >= t.id_to_token_.size())
        t.id_to_token_.resize(static_cast<std::size_t>(i) + 1);
      t.id_to_token_[static_cast<std::size_t>(i)] = token;
      t.ids_[token] = static_cast<std::int32_t>(i);
    }
    int rank = 0;
    for (const json& m : model.at("merges")) {
      std::pair<std::string, std::string> pair;
      if (m.is_array()) {
        pair = {m.at(0).get<std::string>(), m.at(1).get<std::string>()};
      } else {
        const std::string s = m.get<std::string>();
        const auto space = s.find(' ');
        if (space == std::string::npos) bad(where, "key model.merges: '" + s + "'");
        pair = {s.substr(0, space), s.substr(space + 1)};
      }
      t.ranks_.emplace(pair, rank++);
    }
    t.added_.assign(t.id_to_token_.size(), false);
    for (const json& added : doc.value("added_tokens", json::array())) {
      const auto i = added.at("id").get<std::int64_t>();
      if (i < 0 || i >= INT_MAX) bad(where, "key added_tokens: id " + std::to_string(i));
      const auto u = static_cast<std::size_t>(i);
      if (u >= t.id_to_token_.size()) {
        t.id_to_token_.resize(u + 1);
        t.added_.resize(u + 1, false);
      }
      t.id_to_token_[u] = added.at("content").get<std::string>();
      t.added_[u] = true;
      t.ids_[t.id_to_token_[u]] = static_cast<std::int32_t>(i);
    }
  } catch (const json::exception& e) {
    bad(where, std::string("malformed vocabulary, merges or added tokens (") + e.what() + ")");
  }
  return t;
}

void BpeTokenizer::bpe(const std::string& piece, std::vector<std::int32_t>& out) const {
  std::string mapped;
  for (unsigned char c : piece) mapped += byte_char_[c];
  std::vector<std::string> symbols = characters(mapped);
  while (symbols.size() > 1) {
    int best = INT_MAX;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks_.find({symbols[i], symbols[i + 1]});
      if (it != ranks_.end() && it->second < best) best = it->second, at = i;
    }
    if (best == INT_MAX) break;
    const std::string left = symbols[at], right = symbols[at + 1];
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(left + right);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols.swap(merged);
  }
  for (const std::string& s : symbols) {
    const auto it = ids_.find(s);
    if (it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (const std::string& c : characters(s)) {  // a vocabulary without every byte
      const auto byte = ids_.find(c);
      if (byte == ids_.end())
        throw InputError("tokenizer: no id for the byte of '" + c + "' in its vocabulary");
      out.push_back(byte->second);
    }
  }
}

std::vector<std::int32_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<std::int32_t> out;
  std::size_t from = 0;
  while (from < text.size()) {
    // The next added token (e.g. <|endoftext|>) in the text is its id, not its characters.
    std::size_t hit = std::string::npos, hit_id = 0;
    for (std::size_t id = 0; id < added_.size(); ++id) {
      if (!added_[id] || id_to_token_[id].empty()) continue;
      const std::size_t p = text.find(id_to_token_[id], from);
      if (p < hit) hit = p, hit_id = id;
    }
    const std::size_t end = hit == std::string::npos ? text.size() : hit;
    for (const std::string& piece : pre_tokens(text.substr(from, end - from))) bpe(piece, out);
    if (hit == std::string::npos) break;
    out.push_back(static_cast<std::int32_t>(hit_id));
    from = hit + id_to_token_[hit_id].size();
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string bytes;
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) {
      bytes += "<" + std::to_string(id) + ">";
      continue;
    }
    const auto u = static_cast<std::size_t>(id);
    if (added_[u]) {
      bytes += id_to_token_[u];
      continue;
    }
    for (const std::string& c : characters(id_to_token_[u])) {
      const auto it = char_byte_.find(c);
      bytes += it != char_byte_.end() ? static_cast<char>(it->second) : '?';
    }
  }
  return bytes;
}

}  // namespace trellis
