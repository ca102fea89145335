#include "cli/precision_printer.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

#include "cli/step_printer.h"
#include "model/token_display.h"

namespace ts::cli {
namespace {

// A token as a terminal shows it: quoted, its bytes made visible (␣ for a space).
std::string token_text(const Tokenizer& tok, int id) {
  return "\"" + printable(display_piece(tok.token_bytes(id))) + "\"";
}

// s padded with spaces to `width` terminal columns (UTF-8: a column per
// character), so that rows with "␣" line up.
std::string padded(const std::string& s, int width) {
  int w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return s + std::string(std::max(0, width - w), ' ');
}

std::string megabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / 1e6);
  return buf;
}

std::string millis(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", seconds * 1e3);
  return buf;
}

}  // namespace

void print_precision_header(std::ostream& out, const PrecisionCompare& cmp) {
  const PrecisionPair p = cmp.pair();
  const std::string ref = weight_format_name(p.reference), fmt = weight_format_name(p.compared);
  out << "precision: " << ref << " (reference) vs " << fmt << " on "
      << cmp.compared_engine().backend().name() << ", greedy, " << cmp.prompt_tokens().size()
      << " prompt tokens\n"
      << "KL = KL(p_" << ref << " || p_" << fmt
      << ") in nats over the full vocabulary at temperature 1; " << fmt
      << " is teacher-forced on the " << ref << " tokens (same context every row); \"" << fmt
      << " free\" is its own greedy continuation; row 0 is the prefill\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%4s  %-14s  %12s  %-4s  %-14s  %-14s  %9s  %9s  %8s  %8s\n",
                "step", (ref + " token").c_str(), "KL", "top1", (fmt + " token").c_str(),
                (fmt + " free").c_str(), (ref + " MB").c_str(), (fmt + " MB").c_str(),
                (ref + " ms").c_str(), (fmt + " ms").c_str());
  out << buf;
}

void print_precision_row(std::ostream& out, const PrecisionCompare& cmp, const PrecisionStep& s) {
  const Tokenizer& tok = cmp.tokenizer();
  const int first = first_difference(cmp.reference_tokens(), cmp.free_tokens());
  char buf[512];
  std::snprintf(
      buf, sizeof buf, "%4d  %s  %12.6e  %-4s  %s  %s  %9s  %9s  %8s  %8s%s\n", s.index,
      padded(token_text(tok, s.reference_token), 14).c_str(), s.kl, s.top1_agrees() ? "yes" : "NO",
      padded(token_text(tok, s.compared_token), 14).c_str(),
      padded(token_text(tok, s.free_token), 14).c_str(), megabytes(s.reference_bytes).c_str(),
      megabytes(s.compared_bytes).c_str(), millis(s.reference_seconds).c_str(),
      millis(s.compared_seconds).c_str(), first == s.index ? "  <- first divergence" : "");
  out << buf;
  if (!s.changed.empty()) {
    out << "      top-" << kPrecisionTopK << " changed places (token ref rank -> "
        << weight_format_name(cmp.pair().compared) << " rank):";
    for (const RankChange& c : s.changed)
      out << " " << token_text(tok, c.token) << " " << c.reference_rank << "->" << c.compared_rank;
    out << "\n";
  }
}

void print_precision_summary(std::ostream& out, const PrecisionCompare& cmp) {
  const PrecisionSummary s = cmp.summary();
  const PrecisionPair p = cmp.pair();
  const std::string ref = weight_format_name(p.reference), fmt = weight_format_name(p.compared);
  const int agree = static_cast<int>(s.top1_agreement * s.steps + 0.5);
  char buf[256];
  out << "\nsummary over " << s.steps << (s.steps == 1 ? " step\n" : " steps\n");
  std::snprintf(buf, sizeof buf, "  mean KL %.6e nats (max %.6e)\n", s.mean_kl, s.max_kl);
  out << buf;
  std::snprintf(buf, sizeof buf, "  top-1 agreement %.1f%% (%d of %d)\n", 100.0 * s.top1_agreement,
                agree, s.steps);
  out << buf;
  if (s.first_divergence < 0) {
    out << "  first divergence: none (the greedy tokens agree at every step)\n";
  } else {
    const Tokenizer& tok = cmp.tokenizer();
    const int i = s.first_divergence;
    out << "  first divergence: step " << i << " (" << ref << " "
        << token_text(tok, cmp.reference_tokens()[i]) << ", " << fmt << " "
        << token_text(tok, cmp.free_tokens()[i]) << ")\n";
  }
  const char* which = s.steps > 1 ? "per decode step" : "for the prefill";
  out << "  " << ref << ": " << megabytes(s.reference_bytes) << " MB " << which
      << " (weights + KV), median step time " << millis(s.reference_median_seconds) << " ms\n";
  out << "  " << fmt << ": " << megabytes(s.compared_bytes) << " MB " << which
      << " (weights + KV), median step time " << millis(s.compared_median_seconds) << " ms\n";
  const Tokenizer& tok = cmp.tokenizer();
  const std::string prompt = tok.decode(cmp.prompt_tokens());
  out << ref << " text:      "
      << printable(with_replacement_chars(prompt + tok.decode(cmp.reference_tokens()))) << "\n";
  out << fmt
      << " free text: " << printable(with_replacement_chars(prompt + tok.decode(cmp.free_tokens())))
      << "\n";
}

}  // namespace ts::cli
