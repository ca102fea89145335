#include "cli/compare_printer.h"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include "model/token_display.h"
#include "sampling/distribution.h"
#include "session/lane_summary.h"

namespace ts::cli {
namespace {

constexpr int kColumnWidth = 24;
constexpr int kStepWidth = 8;

// Characters a terminal shows for UTF-8 text: bytes that do not continue a character.
int display_width(const std::string& s) {
  int w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

// s cut to `width` characters (an ellipsis marks a cut) and padded with spaces.
std::string fit(const std::string& s, int width) {
  std::string out;
  int w = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
    if (w == width - 1 && display_width(s.substr(i)) > 1) {
      out += "\u2026";
      ++w;
      break;
    }
    out += s.substr(i, len);
    ++w;
    i += len;
  }
  return out + std::string(std::max(0, width - w), ' ');
}

std::string fmt(const char* format, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

void ComparePrinter::print_header(std::ostream& out) const {
  out << fit("step", kStepWidth);
  for (const Lane& lane : session_.lanes())
    out << "| " << fit(std::to_string(lane.id) + ": " + describe(lane.params), kColumnWidth);
  out << "\n" << std::string(kStepWidth, '-');
  for (size_t i = 0; i < session_.lanes().size(); ++i)
    out << "+" << std::string(kColumnWidth + 1, '-');
  out << "\n" << kLaneProbabilityLegend << "\n";
}

void ComparePrinter::print_row(std::ostream& out, const StepTrace& step) {
  if (!header_shown_) {  // the lanes exist once prefill ran
    print_header(out);
    header_shown_ = true;
  }
  const Tokenizer& tok = session_.tokenizer();
  out << fit(step.phase == Phase::kPrefill ? "prefill" : std::to_string(step.index), kStepWidth);
  int first_token = -1;
  bool differ = false;
  bool switched = false;
  bool penalised = false;
  bool contrasted = false;
  for (const Lane& lane : session_.lanes()) {
    const LaneStep* r = session_.record(step.index, lane.id);
    std::string cell;
    if (r && (r->spec || r->lookahead)) {
      // A speculative round or a lookahead pass: every token it committed, and how many.
      const std::vector<int>& committed = r->spec ? r->spec->committed : r->lookahead->committed;
      cell.append("\"");
      for (int id : committed) cell.append(display_piece(tok.token_bytes(id)));
      cell.append("\" x").append(std::to_string(committed.size()));
      if (first_token < 0) first_token = r->chosen_token;
      differ = differ || r->chosen_token != first_token;
    } else if (r) {
      // The window's Lanes panel shows the same number.
      cell.append("\"").append(display_piece(tok.token_bytes(r->chosen_token)));
      cell.append("\" ").append(fmt("%.3f", lane_choice_probability(*r)));
      // A beam lane whose best beam now extends another beam: its text so far changed.
      if (r->beam)
        for (const BeamCandidate& c : r->beam->candidates)
          if (c.new_beam == 0 && c.parent != 0) cell += " \u21ba", switched = true;
      // A contrastive lane: the winner's degeneration penalty.
      if (r->contrastive) {
        cell += " pen " + fmt("%.2f", r->contrastive->candidates[r->contrastive->chosen].penalty);
        penalised = true;
      }
      // A DoLa lane: the premature layer its choice was contrasted with.
      if (r->dola) {
        cell += " L" + std::to_string(r->dola->premature_layer);
        contrasted = true;
      }
      if (first_token < 0) first_token = r->chosen_token;
      differ = differ || r->chosen_token != first_token;
    }
    out << "| " << fit(cell, kColumnWidth);
  }
  if (differ && !diverged_) {
    out << " <- lanes diverge";
    diverged_ = true;
  }
  out << "\n";
  if (switched && !legend_shown_) {
    out << fit("", kStepWidth) << "  (\u21ba: the best beam now extends another beam)\n";
    legend_shown_ = true;
  }
  if (penalised && !contrastive_legend_shown_) {
    out << fit("", kStepWidth)
        << "  (pen: the chosen candidate's largest cosine similarity to an earlier position)\n";
    contrastive_legend_shown_ = true;
  }
  if (contrasted && !dola_legend_shown_) {
    out << fit("", kStepWidth)
        << "  (Ln: DoLa's premature layer, whose distribution was contrasted with the final "
           "one; p is the contrast's)\n";
    dola_legend_shown_ = true;
  }
}

void ComparePrinter::print_summary(std::ostream& out) const {
  out << "\nlane  strategy                  tokens  log-prob  perplexity  distinct-1/2/3    "
         "tok/s  accept  tok/pass  stop\n";
  for (const Lane& lane : session_.lanes()) {
    const LaneSummary s = summarize_lane(session_, lane.id);
    char line[256];
    std::snprintf(line, sizeof line, "%-4d  %s  %6d  %8.2f  %10.2f  %-16s %6s  ", lane.id,
                  fit(describe(lane.params), 24).c_str(), s.tokens, s.log_prob, s.perplexity,
                  (fmt("%.2f", s.distinct[0]) + "/" + fmt("%.2f", s.distinct[1]) + "/" +
                   fmt("%.2f", s.distinct[2]))
                      .c_str(),
                  fmt("%.0f", s.tokens_per_second).c_str());
    out << line;
    // Speculative lanes: drafts accepted / drafted, and tokens per target pass.
    const SpecLaneStats spec = spec_lane_stats(session_, lane.id);
    std::snprintf(line, sizeof line, "%6s  %8s  ",
                  spec.drafted ? fmt("%.2f", spec.acceptance_rate()).c_str() : "-",
                  spec.rounds ? fmt("%.2f", spec.tokens_per_pass()).c_str() : "-");
    out << line << (lane.stop_reason.empty() ? "running" : lane.stop_reason) << "\n";
  }
  if (session_.lanes().size() > 1)
    out << "(tok/s: the lanes share one batched forward pass per step; a speculative lane's time "
           "is its own draft and verify passes, a lookahead or prompt-lookup lane's its own "
           "passes)\n";
}

}  // namespace ts::cli
