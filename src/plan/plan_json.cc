#include "plan/plan_json.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/output_file.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "plan/plan_costs.h"

namespace infinipipe::plan {
namespace {

using nlohmann::json;

constexpr const char* kFormatTag = "infinipipe-plan";

// Longest sequence a plan may name: far beyond any context, small enough that sums of a
// file's worth of them cannot overflow int64.
constexpr int64_t kMaxSeqLength = int64_t{1} << 36;

const json& field(const json& j, const char* key, const std::string& where) {
  return json_field(j, key, "plan JSON: " + where);
}

int64_t as_int(const json& v, const std::string& where, int64_t lo = INT64_MIN,
               int64_t hi = INT64_MAX) {
  const int64_t x = json_int(v, "plan JSON: " + where);
  if (x < lo || x > hi) fail("plan JSON: {} = {} is outside [{}, {}]", where, x, lo, hi);
  return x;
}

int32_t as_int32(const json& v, const std::string& where, int64_t lo, int64_t hi) {
  return static_cast<int32_t>(as_int(v, where, lo, hi));
}

double as_double(const json& v, const std::string& where) {
  return json_number(v, "plan JSON: " + where);
}

bool as_bool(const json& v, const std::string& where) {
  return json_bool(v, "plan JSON: " + where);
}

const json& as_array(const json& v, const std::string& where, size_t size = SIZE_MAX) {
  if (!v.is_array()) fail("plan JSON: {} must be an array, got {}", where, v.type_name());
  if (size != SIZE_MAX && v.size() != size)
    fail("plan JSON: {} must have {} entries, has {}", where, size, v.size());
  return v;
}

// One list of time terms per pipeline rank, each non-negative and finite.
// (rank_time_terms, and rank_step_terms with kPlanStepTerms entries per rank.)
void rank_terms_from_json(std::vector<std::vector<double>>& out, const json& j, const char* key,
                          size_t pp, size_t per_rank) {
  if (!j.contains(key)) return;
  const std::string name = key;
  const json& all = as_array(j.at(key), name.c_str(), pp);
  for (const json& rank : all) {
    std::vector<double> terms;
    for (const json& v : as_array(rank, (name + "[]").c_str(), per_rank)) {
      const double x = as_double(v, (name + "[][]").c_str());
      if (!(x >= 0) || !std::isfinite(x))
        fail("plan JSON: {}[{}] holds {}; time terms are finite and >= 0", name, out.size(), x);
      terms.push_back(x);
    }
    out.push_back(std::move(terms));
  }
}

// [node, cores, ranks] per pipeline rank (Plan::rank_hosts).
void rank_hosts_from_json(Plan& p, const json& j) {
  if (!j.contains("rank_hosts")) return;
  for (const json& h : as_array(j.at("rank_hosts"), "rank_hosts", static_cast<size_t>(p.pp))) {
    const json& v = as_array(h, "rank_hosts[]", 3);
    const std::string at = fmt::format("rank_hosts[{}]", p.rank_hosts.size());
    p.rank_hosts.push_back({as_int(v[0], at + " node", 0), as_int(v[1], at + " cores", 1),
                            as_int(v[2], at + " ranks", 1)});
  }
}

}  // namespace

json plan_to_json(const Plan& plan) {
  json j;
  j["format"] = kFormatTag;
  j["version"] = plan.version;
  j["schedule"] = plan.schedule;
  j["pp"] = plan.pp;
  j["vpp"] = plan.vpp;
  j["memory_budget"] = plan.memory_budget;
  if (plan.forward_only) j["forward_only"] = true;  // absent: a training plan
  j["predicted_step_time"] = plan.predicted_step_time;
  j["predicted_peak_bytes"] = plan.predicted_peak_bytes;
  if (!plan.rank_time_terms.empty()) j["rank_time_terms"] = plan.rank_time_terms;
  if (!plan.rank_step_terms.empty()) j["rank_step_terms"] = plan.rank_step_terms;
  if (!plan.rank_hosts.empty()) {
    json hosts = json::array();
    for (const cost::RankHost& h : plan.rank_hosts) hosts.push_back({h.node, h.cores, h.ranks});
    j["rank_hosts"] = std::move(hosts);
  }
  j["seq_lengths"] = plan.seq_lengths;
  json chunks = json::array();
  for (const Chunk& c : plan.chunks) {
    json slices = json::array();
    for (const Slice& s : c.slices) slices.push_back({s.seq, s.offset, s.len});
    chunks.push_back({{"id", c.id}, {"slices", std::move(slices)}});
  }
  j["chunks"] = std::move(chunks);
  j["pipeline_of_chunk"] = plan.pipeline_of_chunk;
  json stages = json::array();
  for (const StageSpec& s : plan.stages)
    stages.push_back({{"index", s.index},
                      {"rank", s.rank},
                      {"first_layer", s.first_layer},
                      {"num_layers", s.num_layers},
                      {"has_embedding", s.has_embedding},
                      {"has_lm_head", s.has_lm_head}});
  j["stages"] = std::move(stages);
  json actions = json::array();
  for (const auto& list : plan.actions) {
    json rank = json::array();
    for (const Action& a : list)
      rank.push_back({a.kind == ActionKind::forward ? "F" : "B", a.chunk, a.stage,
                      a.recompute_layers, a.predicted_time});
    actions.push_back(std::move(rank));
  }
  j["actions"] = std::move(actions);
  return j;
}

namespace {

// The parts of plan_from_json, in the order the fields depend on each other: lengths, then
// chunks (slices index the lengths), then stages, then actions (they index chunks and stages).
void lengths_from_json(Plan& p, const json& j) {
  const json& lens = as_array(field(j, "seq_lengths", "the plan"), "seq_lengths");
  for (size_t i = 0; i < lens.size(); ++i) {
    p.seq_lengths.push_back(as_int(lens[i], fmt::format("seq_lengths[{}]", i), 1, kMaxSeqLength));
  }
}

void chunks_from_json(Plan& p, const json& j) {
  const int64_t nseq = static_cast<int64_t>(p.seq_lengths.size());
  const json& chunks = as_array(field(j, "chunks", "the plan"), "chunks");
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::string where = fmt::format("chunks[{}]", c);
    Chunk ch;
    ch.id = as_int32(field(chunks[c], "id", where), where + ".id", 0, INT32_MAX);
    if (ch.id != static_cast<int32_t>(c))
      fail("plan JSON: {}.id is {}, expected {} (ids are the chunks' positions)", where, ch.id, c);
    const json& slices = as_array(field(chunks[c], "slices", where), where + ".slices");
    for (size_t k = 0; k < slices.size(); ++k) {
      std::string sw = fmt::format("{}.slices[{}]", where, k);
      const json& s = as_array(slices[k], sw + " ([seq, offset, len])", 3);
      Slice sl;
      sl.seq = as_int32(s[0], sw + ".seq", 0, nseq - 1);
      sl.seq_len = p.seq_lengths[sl.seq];
      sl.offset = as_int(s[1], sw + ".offset", 0, kMaxSeqLength);
      sl.len = as_int(s[2], sw + ".len", 1, kMaxSeqLength);
      if (sl.offset + sl.len > sl.seq_len)
        fail("plan JSON: {} = [{}, {}, {}] is not a token range inside sequence {} of length {}",
             sw, sl.seq, sl.offset, sl.len, sl.seq, sl.seq_len);
      ch.slices.push_back(sl);
    }
    p.chunks.push_back(std::move(ch));
  }

  const int64_t nchunk = static_cast<int64_t>(p.chunks.size());
  const json& poc = as_array(field(j, "pipeline_of_chunk", "the plan"), "pipeline_of_chunk");
  if (!poc.empty() && static_cast<int64_t>(poc.size()) != nchunk)
    fail("plan JSON: pipeline_of_chunk has {} entries but there are {} chunks", poc.size(), nchunk);
  for (size_t i = 0; i < poc.size(); ++i)
    p.pipeline_of_chunk.push_back(
        as_int32(poc[i], fmt::format("pipeline_of_chunk[{}]", i), 0, INT32_MAX));
}

void stages_from_json(Plan& p, const json& j) {
  const int32_t nstage = p.pp * p.vpp;
  const json& stages = as_array(field(j, "stages", "the plan"), "stages", nstage);
  for (int32_t s = 0; s < nstage; ++s) {
    std::string where = fmt::format("stages[{}]", s);
    const json& o = stages[s];
    StageSpec st;
    st.index = as_int32(field(o, "index", where), where + ".index", s, s);
    st.rank = as_int32(field(o, "rank", where), where + ".rank", s % p.pp, s % p.pp);
    st.first_layer = as_int(field(o, "first_layer", where), where + ".first_layer", 0, INT32_MAX);
    st.num_layers = as_int(field(o, "num_layers", where), where + ".num_layers", 0, INT32_MAX);
    st.has_embedding = as_bool(field(o, "has_embedding", where), where + ".has_embedding");
    st.has_lm_head = as_bool(field(o, "has_lm_head", where), where + ".has_lm_head");
    p.stages.push_back(st);
  }
}

void actions_from_json(Plan& p, const json& j) {
  const int64_t nchunk = static_cast<int64_t>(p.chunks.size());
  const int32_t nstage = p.pp * p.vpp;
  const json& actions =
      as_array(field(j, "actions", "the plan"), "actions (one list per rank)", p.pp);
  for (int32_t r = 0; r < p.pp; ++r) {
    std::string where = fmt::format("actions[{}]", r);
    std::vector<Action> list;
    for (size_t i = 0; i < as_array(actions[r], where).size(); ++i) {
      std::string aw = fmt::format("{}[{}]", where, i);
      const json& a = as_array(actions[r][i], aw + " ([kind, chunk, stage, recompute, time])", 5);
      Action act;
      if (a[0] == "F")
        act.kind = ActionKind::forward;
      else if (a[0] == "B")
        act.kind = ActionKind::backward;
      else
        fail("plan JSON: {} kind is {}, expected \"F\" or \"B\"", aw, json_brief(a[0]));
      act.chunk = as_int32(a[1], aw + ".chunk", 0, nchunk - 1);
      act.stage = as_int32(a[2], aw + ".stage", 0, nstage - 1);
      if (act.stage % p.pp != r)
        fail("plan JSON: {} is for stage {}, which lives on rank {}, not rank {}", aw, act.stage,
             act.stage % p.pp, r);
      act.recompute_layers =
          as_int32(a[3], aw + ".recompute_layers", 0, p.stages[act.stage].num_layers);
      act.predicted_time = as_double(a[4], aw + ".predicted_time");
      list.push_back(act);
    }
    p.actions.push_back(std::move(list));
  }
}

}  // namespace

Plan plan_from_json(const json& j) {
  if (!j.is_object()) fail("plan JSON: the top level must be an object, got {}", j.type_name());
  const json& tag = field(j, "format", "the plan");
  if (tag != kFormatTag)
    fail("plan JSON: \"format\" is {}, expected \"{}\": this is not an infinipipe plan",
         json_brief(tag), kFormatTag);
  Plan p;
  p.version = as_int32(field(j, "version", "the plan"), "version", 0, INT32_MAX);
  if (p.version != kPlanFormatVersion)
    fail(
        "plan JSON: version {} is not supported (this build reads version {}); re-create the "
        "plan with `infinipipe plan`",
        p.version, kPlanFormatVersion);
  p.schedule = json_string(field(j, "schedule", "the plan"), "plan JSON: schedule");
  p.pp = as_int32(field(j, "pp", "the plan"), "pp", 1, 1 << 16);
  p.vpp = as_int32(field(j, "vpp", "the plan"), "vpp", 1, 1 << 10);
  p.memory_budget = as_int(field(j, "memory_budget", "the plan"), "memory_budget", 0);
  if (j.contains("forward_only")) {
    if (!j["forward_only"].is_boolean()) fail("plan JSON: forward_only must be true or false");
    p.forward_only = j["forward_only"].get<bool>();
  }
  p.predicted_step_time =
      as_double(field(j, "predicted_step_time", "the plan"), "predicted_step_time");
  for (const json& v :
       as_array(field(j, "predicted_peak_bytes", "the plan"), "predicted_peak_bytes"))
    p.predicted_peak_bytes.push_back(as_int(v, "predicted_peak_bytes[]", 0));
  rank_terms_from_json(p.rank_time_terms, j, "rank_time_terms", static_cast<size_t>(p.pp),
                       kPlanTimeTerms);
  rank_terms_from_json(p.rank_step_terms, j, "rank_step_terms", static_cast<size_t>(p.pp),
                       kPlanStepTerms);  // optional: plans before per-rank costs have none
  rank_hosts_from_json(p, j);  // optional: plans of ranks with cores of their own have none
  lengths_from_json(p, j);
  chunks_from_json(p, j);
  stages_from_json(p, j);
  actions_from_json(p, j);
  return p;
}

void plan_save(const Plan& plan, const std::string& path) {
  plan_save(plan, path, nullptr);
}

void plan_save(const Plan& plan, const std::string& path, const json* explain) {
  json j = plan_to_json(plan);
  if (explain) j["explain"] = *explain;  // informative only: plan_from_json does not read it
  output_file_write(path, j.dump(1) + "\n", "the plan file");
}

Plan plan_load(const std::string& path) {
  const std::string text =
      input_file_read(path, input_kind::kPlan, InputLinks::follow, "the plan file");
  const json j =
      json_parse(text, "the plan file " + path, "re-create it with `infinipipe plan`");
  try {
    return plan_from_json(j);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

}  // namespace infinipipe::plan
