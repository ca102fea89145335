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

// Terminal columns of s (UTF-8: a column per character).
int columns(const std::string& s) {
  int w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

// s padded with spaces to `width` terminal columns, so that rows with "␣"
// line up.
std::string padded(const std::string& s, int width) {
  return s + std::string(std::max(0, width - columns(s)), ' ');
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

// Column widths: wide enough for the headings, which carry the two labels
// (model names are longer than format names).
struct Widths {
  int ref_token, cmp_token, ref_mb, cmp_mb, ref_ms, cmp_ms;
  explicit Widths(const CompareLabels& l) {
    const int r = static_cast<int>(l.reference.size()), c = static_cast<int>(l.compared.size());
    ref_token = std::max(14, r + 6);
    cmp_token = std::max(14, c + 5);
    ref_mb = std::max(9, r + 3);
    cmp_mb = std::max(9, c + 3);
    ref_ms = std::max(8, r + 3);
    cmp_ms = std::max(8, c + 3);
  }
};

}  // namespace

void print_precision_header(std::ostream& out, const PrecisionCompare& cmp) {
  const std::string &ref = cmp.labels().reference, &fmt = cmp.labels().compared;
  out << (cmp.pair() ? "precision: " : "models: ") << ref << " (reference) vs " << fmt << " on "
      << cmp.compared_engine().backend().name() << ", greedy, " << cmp.prompt_tokens().size()
      << (cmp.prompt_tokens().size() == 1 ? " prompt token\n" : " prompt tokens\n") << "KL = KL(p_"
      << ref << " || p_" << fmt << ") in nats over the full vocabulary at temperature 1; " << fmt
      << " is teacher-forced on the " << ref << " tokens (same context every row); \"" << fmt
      << " free\" is its own greedy continuation; row 0 is the prefill\n";
  const Widths w(cmp.labels());
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4s  %-*s  %12s  %-4s  %-*s  %-*s  %*s  %*s  %*s  %*s\n", "step",
                w.ref_token, (ref + " token").c_str(), "KL", "top1", w.cmp_token,
                (fmt + " token").c_str(), w.cmp_token, (fmt + " free").c_str(), w.ref_mb,
                (ref + " MB").c_str(), w.cmp_mb, (fmt + " MB").c_str(), w.ref_ms,
                (ref + " ms").c_str(), w.cmp_ms, (fmt + " ms").c_str());
  out << buf;
}

void print_precision_row(std::ostream& out, const PrecisionCompare& cmp, const PrecisionStep& s) {
  const Tokenizer& tok = cmp.tokenizer();
  const int first = first_difference(cmp.reference_tokens(), cmp.free_tokens());
  const Widths w(cmp.labels());
  char buf[1024];
  std::snprintf(buf, sizeof buf, "%4d  %s  %12.6e  %-4s  %s  %s  %*s  %*s  %*s  %*s%s\n", s.index,
                padded(token_text(tok, s.reference_token), w.ref_token).c_str(), s.kl,
                s.top1_agrees() ? "yes" : "NO",
                padded(token_text(tok, s.compared_token), w.cmp_token).c_str(),
                padded(token_text(tok, s.free_token), w.cmp_token).c_str(), w.ref_mb,
                megabytes(s.reference_bytes).c_str(), w.cmp_mb, megabytes(s.compared_bytes).c_str(),
                w.ref_ms, millis(s.reference_seconds).c_str(), w.cmp_ms,
                millis(s.compared_seconds).c_str(),
                first == s.index ? "  <- first divergence" : "");
  out << buf;
  if (!s.changed.empty()) {
    out << "      top-" << kPrecisionTopK << " changed places (token ref rank -> "
        << cmp.labels().compared << " rank):";
    for (const RankChange& c : s.changed)
      out << " " << token_text(tok, c.token) << " " << c.reference_rank << "->" << c.compared_rank;
    out << "\n";
  }
}

void print_precision_summary(std::ostream& out, const PrecisionCompare& cmp) {
  const PrecisionSummary s = cmp.summary();
  const std::string &ref = cmp.labels().reference, &fmt = cmp.labels().compared;
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
  auto side = [&](const std::string& name, double bytes, double weights, double kv_token,
                  double seconds) {
    char kv[32];
    std::snprintf(kv, sizeof kv, "%.0f", kv_token);
    out << "  " << name << ": " << megabytes(bytes) << " MB " << which
        << " (weights + KV), median step time " << millis(seconds) << " ms; weights "
        << megabytes(weights) << " MB, KV " << kv << " bytes per token\n";
  };
  side(ref, s.reference_bytes, s.reference_weight_bytes, s.reference_kv_token_bytes,
       s.reference_median_seconds);
  side(fmt, s.compared_bytes, s.compared_weight_bytes, s.compared_kv_token_bytes,
       s.compared_median_seconds);
  const Tokenizer& tok = cmp.tokenizer();
  const std::string prompt = tok.decode(cmp.prompt_tokens());
  // The two texts start in one column, whatever the labels' lengths.
  const std::string ref_label = ref + " text:", free_label = fmt + " free text:";
  const int label_width = std::max(columns(ref_label), columns(free_label)) + 1;
  out << padded(ref_label, label_width)
      << printable(with_replacement_chars(prompt + tok.decode(cmp.reference_tokens()))) << "\n";
  out << padded(free_label, label_width)
      << printable(with_replacement_chars(prompt + tok.decode(cmp.free_tokens()))) << "\n";
}

}  // namespace ts::cli
