// The plan JSON's "explain" object (docs/plan-format.md) and back. The reader checks every field
// it takes: the report reads it from traced runs, whose files may be damaged.
#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"
#include "plan/plan_explain.h"

namespace infinipipe::plan {

using nlohmann::json;

json explain_to_json(const PlanExplain& ex) {
  json cands = json::array();
  for (const ExplainCandidate& c : ex.candidates)
    cands.push_back({{"setting", c.setting},
                     {"k", c.k},
                     {"micro_batch_tokens", c.micro_batch_tokens},
                     {"micro_batch_size", c.micro_batch_size},
                     {"vpp", c.vpp},
                     {"recompute_layers", c.recompute_layers},
                     {"chunks", c.chunks},
                     {"pipelines", c.pipelines},
                     {"predicted_step_time", c.step_time},
                     {"predicted_peak_bytes", c.peak_bytes},
                     {"fits", c.fits},
                     {"chosen", c.chosen},
                     {"verdict", c.verdict}});
  json cuts = json::array();
  for (const ExplainCut& c : ex.cuts)
    cuts.push_back({{"seq", c.seq},
                    {"length", c.length},
                    {"rule", c.rule},
                    {"offsets", c.offsets},
                    {"lens", c.lens},
                    {"times", c.times}});
  json packs = json::array();
  for (const ExplainPack& p : ex.packs)
    packs.push_back({{"chunk", p.chunk},
                     {"tail_of", p.tail_of},
                     {"seqs", p.seqs},
                     {"tokens", p.tokens},
                     {"time", p.time}});
  json rec = json::array();
  for (const ExplainRecompute& r : ex.recompute)
    rec.push_back({r.stage, r.chunk, r.rank, r.layers, r.max_layers, r.saved_bytes, r.time});
  json j = {{"schedule", ex.schedule},     {"candidates", std::move(cands)},
            {"notes", ex.notes},           {"pack_rule", ex.pack_rule},
            {"cuts", std::move(cuts)},     {"packs", std::move(packs)},
            {"recompute", std::move(rec)}, {"recompute_time", ex.recompute_time}};
  if (ex.has_limits)
    j["limits"] = {{"time_threshold", ex.limits.time_threshold},
                   {"token_threshold", ex.limits.token_threshold},
                   {"min_tail_slice", ex.limits.min_tail_slice},
                   {"relaxed", ex.relaxed}};
  return j;
}

namespace {

constexpr int64_t kMaxInt32 = INT32_MAX;

const json& array_at(const json& j, const char* key, const std::string& where) {
  const json& a = json_field(j, key, where);
  if (!a.is_array()) fail("{}: {} must be an array, got {}", where, key, json_brief(a));
  return a;
}

const json& object_in(const json& v, const std::string& where) {
  if (!v.is_object()) fail("{} must be an object, got {}", where, json_brief(v));
  return v;
}

int32_t int32_at(const json& j, const char* key, const std::string& where, int64_t lo = -1) {
  return static_cast<int32_t>(
      json_int(json_field(j, key, where), fmt::format("{}: {}", where, key), lo, kMaxInt32));
}

int64_t int64_at(const json& j, const char* key, const std::string& where) {
  return json_int(json_field(j, key, where), fmt::format("{}: {}", where, key), 0);
}

double seconds_at(const json& j, const char* key, const std::string& where) {
  return json_number(json_field(j, key, where), fmt::format("{}: {}", where, key), 0);
}

const std::string& string_at(const json& j, const char* key, const std::string& where) {
  return json_string(json_field(j, key, where), fmt::format("{}: {}", where, key));
}

template <class T>
std::vector<T> ints_at(const json& j, const char* key, const std::string& where, int64_t lo,
                       int64_t hi) {
  std::vector<T> out;
  const json& a = array_at(j, key, where);
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(static_cast<T>(json_int(a[i], fmt::format("{}: {}[{}]", where, key, i), lo, hi)));
  return out;
}

ExplainCandidate candidate_from(const json& v, const std::string& where) {
  object_in(v, where);
  ExplainCandidate c;
  c.setting = string_at(v, "setting", where);
  c.k = int32_at(v, "k", where, 0);
  c.micro_batch_tokens = int64_at(v, "micro_batch_tokens", where);
  c.micro_batch_size = int64_at(v, "micro_batch_size", where);
  c.vpp = int32_at(v, "vpp", where, 1);
  c.recompute_layers = int32_at(v, "recompute_layers", where, -1);
  c.chunks = int32_at(v, "chunks", where, 0);
  c.pipelines = int32_at(v, "pipelines", where, 0);
  c.step_time = seconds_at(v, "predicted_step_time", where);
  c.peak_bytes = ints_at<int64_t>(v, "predicted_peak_bytes", where, 0, INT64_MAX);
  c.fits = json_bool(json_field(v, "fits", where), where + ": fits");
  c.chosen = json_bool(json_field(v, "chosen", where), where + ": chosen");
  c.verdict = string_at(v, "verdict", where);
  return c;
}

ExplainCut cut_from(const json& v, const std::string& where) {
  object_in(v, where);
  ExplainCut c;
  c.seq = int32_at(v, "seq", where, 0);
  c.length = int64_at(v, "length", where);
  c.rule = string_at(v, "rule", where);
  c.offsets = ints_at<int64_t>(v, "offsets", where, 0, INT64_MAX);
  c.lens = ints_at<int64_t>(v, "lens", where, 0, INT64_MAX);
  const json& times = array_at(v, "times", where);
  for (size_t i = 0; i < times.size(); ++i)
    c.times.push_back(json_number(times[i], fmt::format("{}: times[{}]", where, i), 0));
  if (c.offsets.size() != c.lens.size() || c.lens.size() != c.times.size())
    fail("{}: offsets, lens and times must have one entry per slice ({}, {} and {} given)", where,
         c.offsets.size(), c.lens.size(), c.times.size());
  return c;
}

ExplainPack pack_from(const json& v, const std::string& where) {
  object_in(v, where);
  ExplainPack p;
  p.chunk = int32_at(v, "chunk", where, 0);
  p.tail_of = int32_at(v, "tail_of", where, -1);
  p.seqs = ints_at<int32_t>(v, "seqs", where, 0, kMaxInt32);
  p.tokens = int64_at(v, "tokens", where);
  p.time = seconds_at(v, "time", where);
  return p;
}

ExplainRecompute recompute_from(const json& v, const std::string& where) {
  if (!v.is_array() || v.size() != 7)
    fail("{} must be [stage, chunk, rank, layers, max_layers, saved_bytes, time], got {}", where,
         json_brief(v));
  ExplainRecompute r;
  auto i32 = [&](size_t i, const char* name) {
    return static_cast<int32_t>(json_int(v[i], fmt::format("{}: {}", where, name), 0, kMaxInt32));
  };
  r.stage = i32(0, "stage");
  r.chunk = i32(1, "chunk");
  r.rank = i32(2, "rank");
  r.layers = i32(3, "layers");
  r.max_layers = i32(4, "max_layers");
  r.saved_bytes = json_int(v[5], where + ": saved_bytes");  // negative: recompute held more
  r.time = json_number(v[6], where + ": time", 0);
  return r;
}

}  // namespace

PlanExplain explain_from_json(const json& j, const std::string& where) {
  object_in(j, where);
  PlanExplain ex;
  ex.schedule = string_at(j, "schedule", where);
  const json& cands = array_at(j, "candidates", where);
  for (size_t i = 0; i < cands.size(); ++i)
    ex.candidates.push_back(candidate_from(cands[i], fmt::format("{}: candidates[{}]", where, i)));
  const json& notes = array_at(j, "notes", where);
  for (size_t i = 0; i < notes.size(); ++i)
    ex.notes.push_back(json_string(notes[i], fmt::format("{}: notes[{}]", where, i)));
  ex.pack_rule = string_at(j, "pack_rule", where);
  if (const auto l = j.find("limits"); l != j.end()) {
    const std::string at = where + ": limits";
    object_in(*l, at);
    ex.has_limits = true;
    ex.limits.time_threshold = seconds_at(*l, "time_threshold", at);
    ex.limits.token_threshold = int64_at(*l, "token_threshold", at);
    ex.limits.min_tail_slice = int64_at(*l, "min_tail_slice", at);
    ex.relaxed = int32_at(*l, "relaxed", at, 0);
  }
  const json& cuts = array_at(j, "cuts", where);
  for (size_t i = 0; i < cuts.size(); ++i)
    ex.cuts.push_back(cut_from(cuts[i], fmt::format("{}: cuts[{}]", where, i)));
  const json& packs = array_at(j, "packs", where);
  for (size_t i = 0; i < packs.size(); ++i)
    ex.packs.push_back(pack_from(packs[i], fmt::format("{}: packs[{}]", where, i)));
  const json& rec = array_at(j, "recompute", where);
  for (size_t i = 0; i < rec.size(); ++i)
    ex.recompute.push_back(recompute_from(rec[i], fmt::format("{}: recompute[{}]", where, i)));
  ex.recompute_time = seconds_at(j, "recompute_time", where);
  return ex;
}

}  // namespace infinipipe::plan
