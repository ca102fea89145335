#pragma once
// File > Export for slides: which exports exist, their default file names,
// and building one from what the window shows (the viewed step and lane,
// the attention panel's matrix, the settings) and writing it atomically.
#include <filesystem>
#include <string>

#include "app/app_state.h"
#include "app/attention_data.h"
#include "app/view_model.h"

namespace ts::app {

enum class ExportKind {
  kAttentionSvg,
  kAttentionCsv,
  kLogitsSvg,
  kLogitsCsv,
  kSamplingSvg,
  kKvBlocksSvg,
};
inline constexpr int kNumExportKinds = 6;

// "Attention map as SVG" (the menu's words).
const char* export_label(ExportKind kind);
// "tokenscope-attention-step3.svg".
std::string default_export_name(ExportKind kind, int step);

struct ExportSources {
  const SessionSnapshot* snap = nullptr;
  const StepView* view = nullptr;
  const AppState* state = nullptr;
  const AttentionMatrix* attention = nullptr;  // the Attention panel's (what it shows)
};

// The document; throws ts::Error with one line when there is nothing to
// export (no model, no step yet, attention still being recomputed, a step
// the panel does not show as stages).
std::string build_export(ExportKind kind, const ExportSources& src);

// build_export, then written to `path` through a temporary file and a
// rename. Returns "wrote PATH"; throws ts::Error (one line: why) and then
// leaves any existing file as it was.
std::string write_export(ExportKind kind, const ExportSources& src,
                         const std::filesystem::path& path);

}  // namespace ts::app
