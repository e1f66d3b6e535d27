#include "tokenize/hf_bpe.h"

#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "core/json_read.h"
#include "tokenize/hf_text.h"

namespace infinipipe::tokenize {

using Json = nlohmann::json;

namespace {

// A field that must be absent, null or the given harmless value.
void refuse_unless(const Json& model, const char* key, const std::string& where,
                   const Json& harmless) {
  const auto it = model.find(key);
  if (it == model.end() || it->is_null() || *it == harmless) return;
  fail_config("{}.{} is {}: infinipipe's BPE does not support it (it would tokenize differently)",
              where, key, json_brief(*it));
}

bool optional_bool(const Json& model, const char* key, const std::string& where) {
  const auto it = model.find(key);
  if (it == model.end() || it->is_null()) return false;
  return json_bool(*it, where + "." + key);
}

}  // namespace

HfBpe::HfBpe(const Json& model, const std::string& where) {
  refuse_unless(model, "dropout", where, 0.0);
  refuse_unless(model, "continuing_subword_prefix", where, "");
  refuse_unless(model, "end_of_word_suffix", where, "");
  byte_fallback_ = optional_bool(model, "byte_fallback", where);
  ignore_merges_ = optional_bool(model, "ignore_merges", where);
  fuse_unk_ = optional_bool(model, "fuse_unk", where);

  const auto v = model.find("vocab");
  if (v == model.end() || !v->is_object()) fail_config("{}.vocab: missing or not an object", where);
  vocab_.reserve(v->size());
  for (const auto& [token, id] : v->items()) {
    const int64_t i =
        json_int(id, fmt::format("{}.vocab[{}]", where, json_brief(token)), 0, kHfMaxTokenId);
    if (token.empty()) fail_config("{}.vocab: an empty token (id {})", where, i);
    vocab_.emplace(token, int32_t(i));
    max_id_ = std::max(max_id_, i);
  }
  {
    // Two tokens with one id would make decoding ambiguous.
    std::vector<char> seen(size_t(max_id_ + 1), 0);
    for (const auto& [token, id] : vocab_) {
      if (seen[id]++) fail_config("{}.vocab: id {} is given to two tokens", where, id);
    }
  }

  const auto u = model.find("unk_token");
  if (u != model.end() && !u->is_null()) {
    const std::string& unk = json_string(*u, where + ".unk_token");
    unk_ = id_of(unk);
    if (unk_ < 0) fail_config("{}.unk_token {} is not in the vocabulary", where, json_brief(*u));
  }
  for (int b = 0; b < 256; b++) byte_ids_[b] = id_of(fmt::format("<0x{:02X}>", b));

  const auto m = model.find("merges");
  if (m == model.end() || !m->is_array()) fail_config("{}.merges: missing or not an array", where);
  merges_.reserve(m->size());
  int32_t rank = 0;
  for (const Json& merge : *m) {
    const std::string at = fmt::format("{}.merges[{}]", where, rank);
    std::string a, b;
    if (merge.is_string()) {
      const std::string& s = merge.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        fail_config("{}: {} is not two tokens separated by one space", at, json_brief(merge));
      }
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      fail_config("{}: {} is neither \"a b\" nor [\"a\", \"b\"]", at, json_brief(merge));
    }
    const int32_t ia = id_of(a), ib = id_of(b), iab = id_of(a + b);
    if (ia < 0 || ib < 0 || iab < 0) {
      fail_config("{}: {} names a token missing from the vocabulary ({})", at, json_brief(merge),
                  ia < 0   ? a
                  : ib < 0 ? b
                           : a + b);
    }
    // The first of two equal merges ranks; a later duplicate never applies.
    merges_.emplace(pair_key(ia, ib), Merge{rank, iab});
    rank++;
  }
}

int32_t HfBpe::id_of(std::string_view token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void HfBpe::symbols_of(std::string_view piece, std::vector<int32_t>& ids) const {
  bool last_unk = false;
  for (size_t i = 0; i < piece.size();) {
    const size_t n =
        std::min(utf8_char_len(static_cast<unsigned char>(piece[i])), piece.size() - i);
    const std::string_view c = piece.substr(i, n);
    i += n;
    if (const int32_t id = id_of(c); id >= 0) {
      ids.push_back(id);
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char b : c) all = all && byte_ids_[static_cast<unsigned char>(b)] >= 0;
      if (all) {
        for (const char b : c) ids.push_back(byte_ids_[static_cast<unsigned char>(b)]);
        last_unk = false;
        continue;
      }
    }
    if (unk_ < 0) {
      fail(
          "the character U+{:04X} has no token in the tokenizer's vocabulary, and its BPE model "
          "has no unk_token{}",
          uint32_t(utf8_decode_char(c)), byte_fallback_ ? " nor <0xXX> byte tokens" : "");
    }
    if (!(fuse_unk_ && last_unk)) ids.push_back(unk_);
    last_unk = true;
  }
}

void HfBpe::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const int32_t id = id_of(piece); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  thread_local std::vector<int32_t> sym;
  sym.clear();
  symbols_of(piece, sym);
  const int n = int(sym.size());
  if (n == 1) {
    out.push_back(sym[0]);
    return;
  }
  // Lowest rank first, then leftmost: a doubly linked list of symbols and a heap of candidate
  // merges, re-checked when popped since earlier merges may have consumed either side.
  thread_local std::vector<int> prev, next;
  prev.resize(n);
  next.resize(n);
  for (int i = 0; i < n; i++) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto consider = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    const auto it = merges_.find(pair_key(sym[pos], sym[next[pos]]));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.merged});
  };
  for (int i = 0; i + 1 < n; i++) consider(i);
  thread_local std::vector<char> gone;
  gone.assign(n, 0);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    if (gone[c.pos] || next[c.pos] < 0) continue;
    const int right = next[c.pos];
    const auto it = merges_.find(pair_key(sym[c.pos], sym[right]));
    if (it == merges_.end() || it->second.merged != c.merged) continue;  // stale
    sym[c.pos] = c.merged;
    gone[right] = 1;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  for (int i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
}

}  // namespace infinipipe::tokenize
