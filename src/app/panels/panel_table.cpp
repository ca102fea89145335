#include "app/panels/panel_table.h"

#include "app/panels/attention.h"
#include "app/panels/cache.h"
#include "app/panels/guided.h"
#include "app/panels/help.h"
#include "app/panels/kv.h"
#include "app/panels/lanes.h"
#include "app/panels/lens.h"
#include "app/panels/logits.h"
#include "app/panels/lookahead.h"
#include "app/panels/precision.h"
#include "app/panels/prompt.h"
#include "app/panels/quiz.h"
#include "app/panels/roofline.h"
#include "app/panels/rope.h"
#include "app/panels/sampling.h"
#include "app/panels/score.h"
#include "app/panels/spec.h"
#include "app/panels/timeline.h"
#include "app/panels/transport.h"

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
