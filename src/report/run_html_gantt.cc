#include "report/run_html_gantt.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/gantt_svg.h"
#include "report/svg_util.h"

namespace infinipipe::report {

namespace {

std::string no_mark(const std::string& svg, const std::string&) {
  return svg;
}

// One iteration's planned and measured charts on one time scale.
std::string gantt_pair(const sim::StepResult& pred, const sim::StepResult& meas,
                       std::string (*mark)(const std::string&, const std::string&)) {
  GanttOptions go;
  go.time_span = std::max(pred.step_time, meas.step_time);
  go.memory = false;
  go.title = fmt::format("planned (simulated): step {}, bubble {:.1f}%",
                         svg_format_seconds(pred.step_time), 100 * pred.bubble_ratio_mean);
  std::string h = "<figure>" + mark(gantt_svg(pred, go), "gantt-planned") + "</figure>\n";
  go.title = fmt::format("measured: step {}, bubble {:.1f}%", svg_format_seconds(meas.step_time),
                         100 * meas.bubble_ratio_mean);
  return h + "<figure>" + mark(gantt_svg(meas, go), "gantt-measured") + "</figure>\n";
}

constexpr const char* kGanttSelectScript = R"(<script>
(function() {
  var select = document.getElementById('gantt-iteration');
  select.addEventListener('change', function() {
    var blocks = document.querySelectorAll('div.gantt-iteration');
    for (var i = 0; i < blocks.length; ++i)
      blocks[i].style.display =
          blocks[i].getAttribute('data-iteration') === select.value ? '' : 'none';
  });
})();
</script>
)";

}  // namespace

std::string html_gantts(const RunCompare& c,
                        std::string (*mark)(const std::string& svg, const std::string& name)) {
  std::string h = "<h2>Planned and measured (replica 0)</h2>\n";
  h += "<p class=\"note\">Both charts of an iteration share one time scale. Colour = chunk, "
       "darker = backward, hatched = recompute (in the measured chart at the predicted share of "
       "the backward).</p>\n";
  if (c.replica0_steps.size() > 1) {
    h += "<p><label>iteration <select id=\"gantt-iteration\">";
    for (const auto& [it, steps] : c.replica0_steps) {
      h += fmt::format("<option value=\"{0}\"{1}>{0}</option>", it,
                       it == c.shown_iteration ? " selected" : "");
    }
    h += "</select></label></p>\n";
  }
  for (const auto& [it, steps] : c.replica0_steps) {
    const bool shown = it == c.shown_iteration;
    h += fmt::format(
        "<div class=\"gantt-iteration\" data-iteration=\"{}\"{}>\n<h3>Iteration "
        "{}</h3>\n",
        it, shown ? "" : " style=\"display:none\"", it);
    h += gantt_pair(steps.first, steps.second, shown ? mark : no_mark) + "</div>\n";
  }
  if (c.replica0_steps.size() > 1) h += kGanttSelectScript;
  return h;
}

}  // namespace infinipipe::report
