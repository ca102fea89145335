#pragma once
// What every GUI test file starts from: the skip when no display is there,
// the fixture model, and window options for a hidden 1280x800 window on it.
#include <gtest/gtest.h>

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "app/app.h"
#include "app/app_options.h"
#include "app/render/window.h"

namespace ts::app::test {

#define REQUIRE_DISPLAY()                                                                     \
  do {                                                                                        \
    if (!::ts::app::display_available())                                                      \
      GTEST_SKIP() << "no display (DISPLAY is not set): run the GUI tests under xvfb-run -a"; \
  } while (0)

// The tiny fixture model (TS_FIXTURE_DIR overrides the build's path).
inline std::filesystem::path fixture_model() {
  if (const char* env = std::getenv("TS_FIXTURE_DIR"); env && *env)
    return std::filesystem::path(env) / "tiny";
  return std::filesystem::path(TS_FIXTURE_DIR) / "tiny";
}

// A hidden 1280x800 window on the fixture model with a short prompt, the
// given layout, two CPU threads and no saved layout.
inline AppOptions fixture_options(const std::string& layout,
                                  const std::string& prompt = "Today's weather is so") {
  AppOptions o;
  o.setup.model = fixture_model();
  o.setup.cpu_threads = 2;
  o.hidden = true;
  o.save_layout = false;
  o.width = 1280;
  o.height = 800;
  o.layout = layout;
  o.prompt = prompt;
  return o;
}

// Resizes the window and waits until ImGui's viewport has the new size,
// then two frames more.
inline void resize_window(App& app, int w, int h) {
  glfwSetWindowSize(app.window().handle(), w, h);
  for (int i = 0; i < 200; ++i) {
    app.frame();
    const ImVec2 size = ImGui::GetMainViewport()->Size;
    if (size.x == w && size.y == h) break;
  }
  app.frame();
  app.frame();
  ASSERT_EQ(ImGui::GetMainViewport()->Size.x, w);
  ASSERT_EQ(ImGui::GetMainViewport()->Size.y, h);
}

}  // namespace ts::app::test
