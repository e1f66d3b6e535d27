#include "report/run_terms.h"

#include <algorithm>

#include <fmt/format.h>

#include "cost/online_fit.h"

namespace infinipipe::report {

namespace {

double term(const std::vector<double>& terms, cost::OnlineTerm t) {
  return terms.at(static_cast<size_t>(t));
}

std::string rank_cell(const std::vector<double>& terms) {
  using cost::OnlineTerm;
  return fmt::format("{:.1f} ns / {:.3f} ms / {:.2f} / {:.2f}",
                     term(terms, OnlineTerm::alpha2) * 1e9, term(terms, OnlineTerm::beta1) * 1e3,
                     term(terms, OnlineTerm::backward_factor),
                     term(terms, OnlineTerm::recompute_factor));
}

}  // namespace

std::string run_rank_terms_table(const RunTrace& trace) {
  std::string rows;
  size_t ranks = 0;
  for (const auto& [key, plan] : trace.plans) {
    if (key.second != 0 || plan.rank_time_terms.empty()) continue;
    ranks = std::max(ranks, plan.rank_time_terms.size());
    rows += fmt::format("| {} |", key.first);
    for (const std::vector<double>& terms : plan.rank_time_terms)
      rows += fmt::format(" {} |", rank_cell(terms));
    rows += "\n";
  }
  if (rows.empty()) return "";
  std::string head = "| iteration |", rule = "|---|";
  for (size_t r = 0; r < ranks; ++r) {
    head += fmt::format(" rank {} |", r);
    rule += "---|";
  }
  return fmt::format(
      "\n## Per-rank time terms (replica 0's plans)\n\nEach cell: α2 per token / β1 / backward "
      "factor κb / recompute factor κr, the terms that iteration's plan timed the rank with.\n\n"
      "{}\n{}\n{}",
      head, rule, rows);
}

nlohmann::json run_rank_terms_json(const RunTrace& trace) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, plan] : trace.plans) {
    if (plan.rank_time_terms.empty()) continue;
    nlohmann::json ranks = nlohmann::json::array();
    for (const std::vector<double>& terms : plan.rank_time_terms) {
      nlohmann::json r;
      for (int t = 0; t < cost::kNumOnlineTerms; ++t)
        r[cost::online_term_name(static_cast<cost::OnlineTerm>(t))] =
            terms.at(static_cast<size_t>(t));
      ranks.push_back(std::move(r));
    }
    out.push_back({{"iteration", key.first}, {"replica", key.second}, {"ranks", std::move(ranks)}});
  }
  return out;
}

}  // namespace infinipipe::report
