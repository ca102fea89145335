#include "cli/score_printer.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

#include "cli/step_printer.h"

namespace ts::cli {
namespace {

constexpr int kTokenWidth = 14;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Characters a terminal shows for UTF-8 text: bytes that do not continue a character.
int display_width(const std::string& s) {
  int w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

// "\"piece\"" padded to `width` characters (longer pieces are left whole).
std::string quoted(const std::string& piece, int width = 0) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "\"" + string.
  std::string q = "\"";
  q.append(piece).append("\"");
  return q + std::string(std::max(0, width - display_width(q)), ' ');
}

// A probability with three significant digits at any size: 0.4368, 0.0199, 1.09e-04.
std::string prob(double p) { return p >= 0.01 ? fmt("%.4f", p) : fmt("%.2e", p); }

}  // namespace

void print_score(std::ostream& out, const ScoreResult& s, int label) {
  out << "score";
  if (label > 0) out << " " << label;
  out << ": ";
  if (s.prompt.empty())
    out << "whole text \"" << printable(s.continuation) << "\" (its first token is the context)";
  else
    out << "\"" << printable(s.continuation) << "\" after \"" << printable(s.prompt) << "\"";
  out << "\n  one prefill of " << s.tokens.size() << " tokens in " << fmt("%.2f", s.seconds * 1e3)
      << " ms; " << s.scored.size() << " tokens scored\n";
  out << "     # " << quoted("token", kTokenWidth) << "  probability   rank  surprisal"
      << "  model's top 5 here\n";
  for (size_t i = 0; i < s.scored.size(); ++i) {
    const ScoredToken& t = s.scored[i];
    char cols[96];
    std::snprintf(cols, sizeof cols, "  %11s %6d %7.2f bit  ", prob(t.probability).c_str(), t.rank,
                  t.surprisal_bits);
    out << fmt("%6.0f", static_cast<double>(i + 1)) << " " << quoted(printable(t.text), kTokenWidth)
        << cols;
    for (size_t k = 0; k < t.top.size(); ++k) {
      if (k) out << ", ";
      out << quoted(printable(t.top[k].text)) << " " << prob(t.top[k].probability);
    }
    out << "\n";
  }
  out << "  total: log-probability " << fmt("%.4f", s.total_log_prob) << " nats ("
      << fmt("%.2f", s.total_bits) << " bits of surprisal), perplexity "
      << fmt("%.4g", s.perplexity) << " over " << s.scored.size() << " tokens\n";
}

void print_score_difference(std::ostream& out, const ScoreResult& a, const ScoreResult& b) {
  const ScoreDifference d = first_difference(a, b);
  if (!d.same_context) out << "note: the two texts have different contexts\n";
  if (d.index < 0) {
    out << "first difference: none, the two continuations are the same tokens\n";
    return;
  }
  auto side = [](const ScoredToken* t) {
    if (!t) return std::string("(ended)");
    return quoted(printable(t->text)) + " p=" + prob(t->probability) + " (rank " +
           std::to_string(t->rank) + ", " + fmt("%.2f", t->surprisal_bits) + " bits)";
  };
  out << "first difference: scored token " << d.index + 1 << ": " << side(d.a) << " in 1 vs "
      << side(d.b) << " in 2\n";
  out << "  totals: 1 has log-probability " << fmt("%.4f", a.total_log_prob) << ", 2 has "
      << fmt("%.4f", b.total_log_prob) << " nats\n";
}

}  // namespace ts::cli
