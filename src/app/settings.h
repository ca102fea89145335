#pragma once
// The window's own settings in imgui.ini, as a [TokenScope][Settings]
// section: presentation mode, theme, colour map, open panels by key, the
// work area the saved panel positions belong to.
#include "app/app_state.h"

namespace ts::app {

// Registers the section with the current ImGui context; ImGui reads it into
// `settings` when it loads imgui.ini and writes it from there when it saves.
// `settings` must outlive the context.
void register_settings_handler(Settings& settings);

// Whether imgui.ini would save `a` and `b` the same.
bool settings_equal(const Settings& a, const Settings& b);

}  // namespace ts::app
