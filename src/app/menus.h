#pragma once
// The menu bar and its dialogs (the App members are defined in menus.cpp):
// File, View, Lessons, Help, and the popups that ask for a path.
#include <functional>
#include <string>

namespace ts::app {

// A modal dialog that asks for a path: `explain` draws what the file is,
// then the path field, the `action` button and Cancel. `open_request` (set
// by a menu item) opens it and is cleared. Returns true in the frame the
// action button is clicked while `action_enabled`; the dialog closes then.
bool path_popup(const char* title, bool& open_request, std::string& path, const char* action,
                const std::function<void()>& explain, bool action_enabled = true);

}  // namespace ts::app
