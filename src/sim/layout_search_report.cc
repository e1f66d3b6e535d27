#include "sim/layout_search_report.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/schedule_table.h"

namespace infinipipe::sim {
namespace {

std::string peaks_text(const std::vector<int64_t>& peaks) {
  std::string out;
  for (size_t i = 0; i < peaks.size(); ++i)
    out += fmt::format("{}{}", i ? ", " : "", format_bytes(peaks[i]));
  return out;
}

std::string vpp_text(const Layout& l) {
  return l.vpp > 0 ? fmt::format("{}", l.vpp) : "–";
}

// Whether the layouts name their rank order (the search weighed it): then a column says it.
bool names_orders(const LayoutSearchResult& r) {
  for (const LayoutResult& x : r.ranked)
    if (x.layout.names_order()) return true;
  return false;
}

// "| pipelines" (with the leading separator) where orders are named, else nothing.
std::string order_cell(const LayoutSearchResult& r, const Layout& l) {
  return names_orders(r) ? fmt::format(" {} |", rank_order_name(l.order)) : "";
}

std::string order_head(const LayoutSearchResult& r) {
  return names_orders(r) ? " rank order |" : "";
}

size_t feasible_count(const LayoutSearchResult& r) {
  size_t n = 0;
  for (const LayoutResult& x : r.ranked) n += x.feasible;
  return n;
}

std::string skipped_note(const LayoutSearchResult& r) {
  const size_t n = layout_search_skipped(r);
  return n > 0 ? fmt::format(", {} not evaluated", n) : "";
}

}  // namespace

size_t layout_search_skipped(const LayoutSearchResult& r) {
  size_t n = 0;
  for (const LayoutResult& x : r.ranked) n += !x.evaluated;
  return n;
}

std::string layout_search_markdown(const LayoutSearchResult& r, const LayoutSpace& space) {
  std::string out = fmt::format(
      "layout search: {} devices ({} per node), {} sampled batch(es), {} tokens; {} layouts, {} "
      "feasible{}{}\n\n",
      space.num_devices, space.devices_per_node > 0 ? space.devices_per_node : space.num_devices,
      r.batches, r.tokens, r.ranked.size(), feasible_count(r), skipped_note(r),
      r.link_hosts > 1
          ? fmt::format("; transfers priced by the measured links between {} hosts", r.link_hosts)
          : "");
  out += fmt::format(
      "| rank | pp | vpp | ulysses | dp | schedule |{} tokens/s | step (mean) | peak memory per "
      "stage | budget | setting (first batch) |\n|---:|---:|---:|---:|---:|---|{}---:|---:|---|---:"
      "|---|\n",
      order_head(r), names_orders(r) ? "---|" : "");
  int rank = 0;
  for (const LayoutResult& x : r.ranked) {
    if (!x.feasible) continue;
    const Layout& l = x.layout;
    out += fmt::format("| {} | {} | {} | {} | {} | {} |{} {:.0f} | {:.3f} s | {} | {} | {} |\n",
                       ++rank, l.pp, vpp_text(l), l.ulysses, l.dp, plan::schedule_name(l.schedule),
                       order_cell(r, l), x.tokens_per_s, x.mean_step_s, peaks_text(x.peak_bytes),
                       format_bytes(x.budget_bytes), x.setting);
  }
  if (layout_search_skipped(r) > 0) {
    out += fmt::format(
        "\nnot evaluated (their bound on tokens/s is below the best; --search-layout-exhaustive "
        "plans them):\n\n| pp | vpp | ulysses | dp | schedule |{} at most tokens/s | after "
        "replica plans | bound before planning |\n|---:|---:|---:|---:|---|{}---:|---:|---:|\n",
        order_head(r), names_orders(r) ? "---|" : "");
    for (const LayoutResult& x : r.ranked) {
      if (x.evaluated) continue;
      const Layout& l = x.layout;
      out += fmt::format("| {} | {} | {} | {} | {} |{} {:.0f} | {} of {} | {:.0f} |\n", l.pp,
                         vpp_text(l), l.ulysses, l.dp, plan::schedule_name(l.schedule),
                         order_cell(r, l), x.stop_bound_tokens_per_s, x.plans_made, x.replica_plans,
                         x.bound_tokens_per_s);
    }
  }
  if (feasible_count(r) + layout_search_skipped(r) == r.ranked.size()) return out;
  out += fmt::format(
      "\ninfeasible:\n\n| pp | vpp | ulysses | dp | schedule |{} reason "
      "|\n|---:|---:|---:|---:|---|{}---|\n",
      order_head(r), names_orders(r) ? "---|" : "");
  for (const LayoutResult& x : r.ranked) {
    if (x.feasible || !x.evaluated) continue;
    const Layout& l = x.layout;
    out += fmt::format("| {} | {} | {} | {} | {} |{} {} |\n", l.pp, vpp_text(l), l.ulysses, l.dp,
                       plan::schedule_name(l.schedule), order_cell(r, l), x.reason);
  }
  return out;
}

std::string layout_search_choice(const LayoutSearchResult& r) {
  const LayoutResult* best = r.best();
  if (!best) {
    std::string why;
    for (const LayoutResult& x : r.ranked)
      why += fmt::format("\n  {}: {}", x.layout.describe(), x.reason);
    fail_config("no layout can run this workload:{}\nraise --memory-budget or change the model",
                why);
  }
  return fmt::format(
      "{}: predicted {:.0f} tokens/s, step {:.3f} s (best of {} feasible layouts of {}, {} "
      "sampled batch(es){})",
      best->layout.describe(), best->tokens_per_s, best->mean_step_s, feasible_count(r),
      r.ranked.size(), r.batches,
      layout_search_skipped(r) > 0
          ? fmt::format("; {} not evaluated: their bound is below it", layout_search_skipped(r))
          : std::string());
}

std::string layout_search_order_reason(const LayoutSearchResult& r) {
  const LayoutResult* best = r.best();
  if (!best || !best->layout.placed) return "";
  const Layout& l = best->layout;
  const LayoutResult* other = nullptr;
  for (const LayoutResult& x : r.ranked) {
    Layout same = x.layout;
    same.order = l.order;
    if (same == l && x.layout.order != l.order) other = &x;
  }
  const auto formula = [](RankOrder o) {
    return o == RankOrder::pipelines ? "rank = replica x pp + stage"
                                     : "rank = stage x dp + replica";
  };
  Layout plain = l;
  plain.placed = false;
  plain.order = RankOrder::megatron;
  std::string against = "the only order searched";
  if (other && other->feasible)
    against = fmt::format("against {:.0f} tokens/s in {}", other->tokens_per_s,
                          rank_order_text(other->layout.order));
  else if (other && !other->evaluated)
    against = fmt::format("against at most {:.0f} tokens/s in {} (its bound; not planned further)",
                          other->stop_bound_tokens_per_s, rank_order_text(other->layout.order));
  else if (other)
    against =
        fmt::format("{} cannot run it: {}", rank_order_text(other->layout.order), other->reason);
  return fmt::format("{} ({}) for {}: predicted {:.0f} tokens/s, {}", rank_order_text(l.order),
                     formula(l.order), plain.describe(), best->tokens_per_s, against);
}

nlohmann::json layout_search_json(const LayoutSearchResult& r, const LayoutSpace& space) {
  nlohmann::json layouts = nlohmann::json::array();
  int rank = 0;
  for (const LayoutResult& x : r.ranked) {
    const Layout& l = x.layout;
    nlohmann::json j = {{"pp", l.pp},
                        {"vpp", l.vpp},
                        {"ulysses", l.ulysses},
                        {"dp", l.dp},
                        {"schedule", plan::schedule_name(l.schedule)},
                        {"feasible", x.feasible},
                        {"evaluated", x.evaluated}};
    if (l.names_order()) j["rank_order"] = rank_order_name(l.order);
    if (x.bound_tokens_per_s > 0 && std::isfinite(x.bound_tokens_per_s))
      j["bound_tokens_per_s"] = x.bound_tokens_per_s;
    if (x.feasible) {
      j["rank"] = ++rank;
      j["tokens_per_s"] = x.tokens_per_s;
      j["mean_step_s"] = x.mean_step_s;
      j["peak_bytes"] = x.peak_bytes;
      j["budget_bytes"] = x.budget_bytes;
      j["setting"] = x.setting;
    } else {
      j["reason"] = x.reason;
    }
    if (!x.evaluated) {
      j["stop_bound_tokens_per_s"] = x.stop_bound_tokens_per_s;
      j["plans_made"] = x.plans_made;
      j["replica_plans"] = x.replica_plans;
    }
    layouts.push_back(std::move(j));
  }
  nlohmann::json out = {
      {"num_devices", space.num_devices},
      {"devices_per_node", space.devices_per_node > 0 ? space.devices_per_node : space.num_devices},
      {"batches", r.batches},
      {"tokens", r.tokens},
      {"layouts", std::move(layouts)}};
  if (r.link_hosts > 0) out["link_hosts"] = r.link_hosts;
  return out;
}

}  // namespace infinipipe::sim
