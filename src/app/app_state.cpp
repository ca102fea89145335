#include "app/app_state.h"

namespace ts::app {

const char* panel_title(PanelId id) {
  switch (id) {
    case PanelId::kPrompt:
      return "Prompt & tokens";
    case PanelId::kTransport:
      return "Step control";
    case PanelId::kAttention:
      return "Attention";
    case PanelId::kKvCache:
      return "KV cache";
    case PanelId::kLogits:
      return "Logits";
    case PanelId::kSampling:
      return "Choosing the next token";
    case PanelId::kTimeline:
      return "Timeline";
    case PanelId::kRoofline:
      return "Roofline";
    case PanelId::kLogitLens:
      return "Logit lens";
    case PanelId::kCacheCompare:
      return "KV cache on vs off";
    case PanelId::kLanes:
      return "Lanes: strategies side by side";
    case PanelId::kHelp:
      return "Help";
    case PanelId::kStatusBar:
      return "##status";
  }
  return "?";
}

const char* panel_key(PanelId id) {
  switch (id) {
    case PanelId::kPrompt:
      return "prompt";
    case PanelId::kTransport:
      return "transport";
    case PanelId::kAttention:
      return "attention";
    case PanelId::kKvCache:
      return "kv";
    case PanelId::kLogits:
      return "logits";
    case PanelId::kSampling:
      return "sampling";
    case PanelId::kTimeline:
      return "timeline";
    case PanelId::kRoofline:
      return "roofline";
    case PanelId::kLogitLens:
      return "lens";
    case PanelId::kCacheCompare:
      return "cache";
    case PanelId::kLanes:
      return "lanes";
    case PanelId::kHelp:
      return "help";
    case PanelId::kStatusBar:
      return "status";
  }
  return "?";
}

bool parse_panel_key(const std::string& key, PanelId& out) {
  for (int i = 0; i < kNumPanels; ++i)
    if (key == panel_key(static_cast<PanelId>(i))) {
      out = static_cast<PanelId>(i);
      return true;
    }
  return false;
}

}  // namespace ts::app
