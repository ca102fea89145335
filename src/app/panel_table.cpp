#include "app/panel_table.h"

#include "app/panel_attention.h"
#include "app/panel_cache_compare.h"
#include "app/panel_help.h"
#include "app/panel_kv_cache.h"
#include "app/panel_lanes.h"
#include "app/panel_lesson.h"
#include "app/panel_logit_lens.h"
#include "app/panel_logits.h"
#include "app/panel_prompt.h"
#include "app/panel_quiz.h"
#include "app/panel_roofline.h"
#include "app/panel_sampling.h"
#include "app/panel_score.h"
#include "app/panel_speculative.h"
#include "app/panel_timeline.h"
#include "app/panel_transport.h"

namespace ts::app {

const char* panel_help(PanelId id) {
  switch (id) {
#define TS_PANEL_HELP(id, key, title, cls, classroom, open) \
  case PanelId::k##id:                                      \
    return cls::kHelp;
    TS_PANEL_LIST(TS_PANEL_HELP)
#undef TS_PANEL_HELP
    case PanelId::kStatusBar:
      return "The backend and device that compute, the model, and any error.";
  }
  return "";
}

std::array<std::unique_ptr<Panel>, kNumWindowPanels> make_panels() {
  return {
#define TS_PANEL_MAKE(id, key, title, cls, classroom, open) std::make_unique<cls>(),
      TS_PANEL_LIST(TS_PANEL_MAKE)
#undef TS_PANEL_MAKE
  };
}

}  // namespace ts::app
