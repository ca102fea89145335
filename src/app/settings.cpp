#include "app/settings.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <imgui.h>
#include <imgui_internal.h>

#include "app/render/colormap.h"

namespace ts::app {

namespace {

void* settings_open(ImGuiContext*, ImGuiSettingsHandler* h, const char* name) {
  return std::strcmp(name, "Settings") == 0 ? h->UserData : nullptr;
}

void settings_read_line(ImGuiContext*, ImGuiSettingsHandler*, void* entry, const char* line) {
  Settings& s = *static_cast<Settings*>(entry);
  int i = 0;
  float f = 0;
  char name[64] = {0};
  if (std::sscanf(line, "Presentation=%d", &i) == 1)
    s.presentation = i != 0;
  else if (std::sscanf(line, "LightTheme=%d", &i) == 1)
    s.light_theme = i != 0;
  else if (std::sscanf(line, "Colormap=%63s", name) == 1)
    parse_colormap(name, s.colormap);
  else if (std::sscanf(line, "LogScale=%d", &i) == 1)
    s.scale = i ? HeatScale::kLog : HeatScale::kLinear;
  else if (std::sscanf(line, "Thumbnails=%d", &i) == 1)
    s.show_thumbnails = i != 0;
  else if (std::sscanf(line, "LogitView=%d", &i) == 1)
    s.logit_view = static_cast<LogitView>(std::clamp(i, 0, 2));
  else if (std::sscanf(line, "TopN=%d", &i) == 1)
    s.top_n = std::clamp(i, 3, 40);
  else if (float w = 0, h = 0; std::sscanf(line, "WorkArea=%fx%f", &w, &h) == 2) {
    s.work_w = w;
    s.work_h = h;
  } else if (std::sscanf(line, "RunSpeed=%f", &f) == 1)
    s.run_speed = std::clamp(f, 0.25f, 20.0f);
  else if (std::sscanf(line, "Open.%63[^=]=%d", name, &i) == 2) {
    // One line per panel, by its stable key: the order of panels in the
    // code does not matter, and a key this build does not know is skipped.
    PanelId id;
    if (parse_panel_key(name, id) && static_cast<int>(id) < kNumWindowPanels)
      s.panel_open(id) = i != 0;
  } else if (std::sscanf(line, "Open=%63s", name) == 1) {
    // Earlier versions saved one digit per panel in this order.
    static constexpr const char* kLegacyOrder[] = {"prompt", "transport", "attention", "kv",
                                                   "logits", "sampling",  "timeline",  "roofline",
                                                   "lens",   "cache",     "lanes",     "help"};
    PanelId id;
    for (int p = 0; p < 12 && name[p]; ++p)
      if (parse_panel_key(kLegacyOrder[p], id)) s.panel_open(id) = name[p] == '1';
  }
}

void settings_write(ImGuiContext*, ImGuiSettingsHandler* h, ImGuiTextBuffer* buf) {
  const Settings& s = *static_cast<const Settings*>(h->UserData);
  buf->appendf("[%s][Settings]\n", h->TypeName);
  buf->appendf("Presentation=%d\n", s.presentation ? 1 : 0);
  buf->appendf("LightTheme=%d\n", s.light_theme ? 1 : 0);
  buf->appendf("Colormap=%s\n", colormap_name(s.colormap));
  buf->appendf("LogScale=%d\n", s.scale == HeatScale::kLog ? 1 : 0);
  buf->appendf("Thumbnails=%d\n", s.show_thumbnails ? 1 : 0);
  buf->appendf("LogitView=%d\n", static_cast<int>(s.logit_view));
  buf->appendf("TopN=%d\n", s.top_n);
  buf->appendf("RunSpeed=%.3g\n", s.run_speed);
  buf->appendf("WorkArea=%.0fx%.0f\n", s.work_w, s.work_h);
  for (int p = 0; p < kNumWindowPanels; ++p)
    buf->appendf("Open.%s=%d\n", panel_key(static_cast<PanelId>(p)), s.open[p] ? 1 : 0);
  buf->append("\n");
}

}  // namespace

void register_settings_handler(Settings& settings) {
  ImGuiSettingsHandler h;
  h.TypeName = "TokenScope";
  h.TypeHash = ImHashStr("TokenScope");
  h.ReadOpenFn = settings_open;
  h.ReadLineFn = settings_read_line;
  h.WriteAllFn = settings_write;
  h.UserData = &settings;
  GImGui->SettingsHandlers.push_back(h);
}

bool settings_equal(const Settings& a, const Settings& b) {
  return a.presentation == b.presentation && a.light_theme == b.light_theme &&
         a.colormap == b.colormap && a.scale == b.scale && a.show_thumbnails == b.show_thumbnails &&
         a.logit_view == b.logit_view && a.top_n == b.top_n && a.run_speed == b.run_speed &&
         a.open == b.open && a.work_w == b.work_w && a.work_h == b.work_h;
}

}  // namespace ts::app
