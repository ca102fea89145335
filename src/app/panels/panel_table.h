#pragma once
// The panels as objects, from the rows of panel_list.h: one instance of each
// (in View-menu order) and each one's help text.
#include <array>
#include <memory>

#include "app/panels/panel.h"

namespace ts::app {

// The "?" text of a panel (the status bar's too).
const char* panel_help(PanelId id);

// One panel of every row, indexed by PanelId.
std::array<std::unique_ptr<Panel>, kNumWindowPanels> make_panels();

}  // namespace ts::app
