#include "app/exports/exports.h"

#include "app/exports/export_csv.h"
#include "app/exports/export_svg.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ts::app {

const char* export_label(ExportKind kind) {
  switch (kind) {
    case ExportKind::kAttentionSvg:
      return "Attention map as SVG";
    case ExportKind::kAttentionCsv:
      return "Attention matrix as CSV";
    case ExportKind::kLogitsSvg:
      return "Logits bars as SVG";
    case ExportKind::kLogitsCsv:
      return "Logits as CSV";
    case ExportKind::kSamplingSvg:
      return "Sampling stages as SVG";
    case ExportKind::kKvBlocksSvg:
      return "KV cache blocks as SVG";
  }
  return "?";
}

std::string default_export_name(ExportKind kind, int step) {
  const char* base = "attention";
  const char* ext = ".svg";
  switch (kind) {
    case ExportKind::kAttentionSvg:
      break;
    case ExportKind::kAttentionCsv:
      ext = ".csv";
      break;
    case ExportKind::kLogitsSvg:
      base = "logits";
      break;
    case ExportKind::kLogitsCsv:
      base = "logits";
      ext = ".csv";
      break;
    case ExportKind::kSamplingSvg:
      base = "sampling";
      break;
    case ExportKind::kKvBlocksSvg:
      base = "kv-cache";
      break;
  }
  return std::string("tokenscope-") + base + "-step" + std::to_string(std::max(0, step)) + ext;
}

namespace {

// "prefill" / "decode step 3", the lane when there are several, the model.
std::string step_words(const SessionSnapshot& snap, const StepView& v) {
  std::string s = v.trace && v.trace->phase == Phase::kPrefill
                      ? "prefill"
                      : "decode step " + std::to_string(v.step);
  if (snap.lanes.size() > 1) s += ", lane " + std::to_string(v.lane);
  if (v.branched) s += " (branched)";
  s += "  \u00B7  " + snap.model_name;
  return s;
}

}  // namespace

std::string build_export(ExportKind kind, const ExportSources& src) {
  if (!src.snap || !src.view || !src.state) throw Error("no model loaded: nothing to export");
  const SessionSnapshot& snap = *src.snap;
  const StepView& v = *src.view;
  if (v.step < 0 || !v.trace) throw Error("nothing to export yet: run prefill first (Space)");
  auto piece = [&](int id) { return token_piece(snap, id); };
  switch (kind) {
    case ExportKind::kAttentionSvg:
    case ExportKind::kAttentionCsv: {
      if (!src.attention || src.attention->n == 0)
        throw Error("no attention on show: open the Attention panel");
      const AttentionMatrix& m = *src.attention;
      if (!m.complete)
        throw Error("the attention is still being recomputed: export again in a moment");
      std::vector<std::string> labels;
      for (int t : m.tokens) labels.push_back(piece(t));
      if (kind == ExportKind::kAttentionCsv) return attention_csv(m, labels);
      const AttentionSelection& sel = src.state->attention;
      AttentionSvgInput in;
      in.matrix = &m;
      in.labels = std::move(labels);
      in.title = "Attention, layer " + std::to_string(sel.layer) +
                 (sel.average ? ", average of " + std::to_string(snap.config.n_head) + " heads"
                              : ", head " + std::to_string(sel.head));
      in.subtitle = step_words(snap, v);
      in.colormap = src.state->settings.colormap;
      in.range.scale = src.state->settings.scale;
      return attention_svg(in);
    }
    case ExportKind::kLogitsSvg: {
      if (!v.record || v.record->logits.empty()) throw Error("no logits at this step");
      const std::string after = v.cached > 0 ? piece(v.tokens[v.cached - 1]) : "";
      return logits_svg(*v.record, piece, src.state->settings.logit_view, src.state->settings.top_n,
                        "Scores for the token after \u201C" + after + "\u201D (position " +
                            std::to_string(v.cached - 1) + ")",
                        step_words(snap, v));
    }
    case ExportKind::kLogitsCsv:
      return logits_csv(*v.trace, v.step, piece);
    case ExportKind::kSamplingSvg: {
      if (!v.record || v.record->logits.empty()) throw Error("no choice at this step");
      return sampling_svg(*v.record, v.branched, piece,
                          "How " + format_strategy(v.record->params) + " chose the next token",
                          step_words(snap, v));
    }
    case ExportKind::kKvBlocksSvg:
      return kv_blocks_svg(snap, v, "KV cache blocks after " + step_words(snap, v));
  }
  throw Error("unknown export");
}

std::string write_export(ExportKind kind, const ExportSources& src,
                         const std::filesystem::path& path) {
  if (path.empty()) throw Error("no file name given");
  const std::string doc = build_export(kind, src);
  write_file_atomically(path, doc);
  return "wrote " + path.string();
}

}  // namespace ts::app
