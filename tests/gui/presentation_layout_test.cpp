// What a class sees on a projector (under Xvfb): at 1280x720 and 1920x1080,
// presentation mode on and off, the Choosing panel's candidate table keeps
// several rows in view, the roofline's labels keep off its points and off
// each other, and a running lesson's bar leaves the panels its step is about
// inside the window with room to read.
#include <gtest/gtest.h>

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "app/app.h"
#include "app/layout.h"
#include "app/panels/roofline.h"
#include "app/ui_util.h"
#include "gui_test_support.h"
#include "util/paths.h"

namespace ts::app {
namespace {

constexpr std::pair<int, int> kSizes[] = {{1280, 720}, {1920, 1080}};

void resize(App& app, int w, int h) { test::resize_window(app, w, h); }

void step(App& app) {
  app.frame();
  app.advance();
  app.settle(2, 100);
}

// The fixture model loaded, its prefill and one decode step run.
void load_and_step_twice(App& app) {
  app.load_model_blocking();
  app.settle();
  step(app);
  step(app);
}

const PanelBox& box(App& app, PanelId id) { return app.last_frame().boxes[static_cast<int>(id)]; }

bool overlap(const RooflineBox& a, const RooflineBox& b) {
  return a.min.x < b.max.x && a.max.x > b.min.x && a.min.y < b.max.y && a.max.y > b.min.y;
}

void expect_inside(App& app, PanelId id, float w, float h) {
  ASSERT_TRUE(app.last_frame().was_drawn(id)) << panel_key(id);
  const PanelBox& b = box(app, id);
  EXPECT_GE(b.x, -0.5f) << panel_key(id);
  EXPECT_GE(b.y, -0.5f) << panel_key(id);
  EXPECT_LE(b.x + b.w, w + 0.5f) << panel_key(id);
  EXPECT_LE(b.y + b.h, h - StatusBar::height() + 0.5f) << panel_key(id);
}

// Every layout that shows the Choosing panel, at both projector sizes,
// presentation mode on and off: at least kMinTableRows candidates of its
// table wholly in view (before, a 1280x720 projector showed about one row).
TEST(PresentationLayout, TheChoosingTableKeepsItsRowsInView) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("lesson"));
  load_and_step_twice(app);
  for (const bool presentation : {true, false}) {
    app.state().settings.presentation = presentation;
    for (const auto& [w, h] : kSizes) {
      resize(app, w, h);
      for (const char* layout : {"lesson", "sampling", "classroom"}) {
        app.state().layout_request = layout;
        app.settle(3, 50);
        app.frame();
        SCOPED_TRACE(std::string(layout) + " at " + std::to_string(w) + "x" + std::to_string(h) +
                     (presentation ? ", presentation" : ""));
        ASSERT_EQ(app.window().presentation(), presentation);
        if (!app.last_frame().was_drawn(PanelId::kSampling)) {
          // The projector's classroom shows three panels; Choosing is not one.
          EXPECT_TRUE(presentation && std::string(layout) == "classroom");
          continue;
        }
        EXPECT_GE(app.sampling_panel().visible_rows(), SamplingPanel::kMinTableRows);
      }
    }
  }
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// With every sampling stage on, the Choosing table cuts no header, count or
// probability at projector sizes (before, at 1024x768 in presentation mode
// the headers ran into each other, "%" signs were cut and the top-p column
// read "154 (\u22128,030"): the bars give way first, then the table scrolls.
TEST(PresentationLayout, TheChoosingTableCutsNoCellAtProjectorSizes) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("lesson"));
  load_and_step_twice(app);
  SamplingParams p;
  p.do_sample = true;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.01f;
  p.repetition_penalty = 1.2f;
  app.state().strategy = p;
  app.controller().choose_with(0, p);
  app.settle(3, 50);
  bool saw_scrolled = false, saw_bars = false;
  for (const bool presentation : {true, false})
    for (const auto& [w, h] : {std::pair{1024, 768}, {1280, 720}, {1600, 900}, {1920, 1080}}) {
      app.state().settings.presentation = presentation;
      resize(app, w, h);
      for (const char* layout : {"lesson", "sampling"}) {
        app.state().layout_request = layout;
        app.settle(3, 50);
        app.frame();
        SCOPED_TRACE(std::string(layout) + " at " + std::to_string(w) + "x" + std::to_string(h) +
                     (presentation ? ", presentation" : ""));
        ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
        const SamplingPanel& panel = app.sampling_panel();
        ASSERT_TRUE(panel.record().has_value());
        const auto& stages = panel.record()->stages;
        EXPECT_GE(std::count_if(stages.begin(), stages.end(),
                                [](const StageRecord& st) { return st.active; }),
                  5)
            << "every stage should be on";
        EXPECT_EQ(panel.clipped_cells(), 0);
        saw_scrolled |= panel.stage_table_layout() == SamplingPanel::StageTableLayout::kScrolled;
        saw_bars |= panel.stage_table_layout() == SamplingPanel::StageTableLayout::kBars;
      }
    }
  // Both ends of the range were met: a narrow projector and a wide screen.
  EXPECT_TRUE(saw_scrolled);
  EXPECT_TRUE(saw_bars);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// Roofs and achieved FLOP/s of a plausible 2-core machine, fixed: each point
// at a set share of its roof, so where the points and labels go depends on
// no timing (a loaded machine, or a sanitizer's slowdown, crowded the
// measured points until the step's label found no clear place).
RooflineMeasurements fixed_roofline_measurements() {
  RooflineMeasurements m;
  m.roofs.peak_flops = 80e9;
  m.roofs.bandwidth = 12e9;
  m.roofs.working_set_bytes = 0.5e6;  // the fixture's weights stream from the caches
  m.roofs.working_set_bandwidth = 50e9;
  m.roofs.how = "fixed by the test";
  m.flops_per_s = [roofs = m.roofs](const RooflinePoint& p) {
    const double roof = std::min(roofs.peak_flops, roofs.effective_bandwidth() * p.intensity);
    double share = 0.15;                                // a decode step
    if (p.label.rfind("prefill", 0) == 0) share = 0.3;  // many rows per weight read
    if (p.ring) share = p.label.rfind("cache off", 0) == 0 ? 0.25 : 0.12;  // the comparison
    return roof * share;
  };
  return m;
}

// A layout without the attention panel settles as soon as the step is done:
// the hidden panel has no matrix left to compute, so neither a test's
// settle() nor the idle window (which sleeps between frames once settled)
// waits on it. It once ran settle() to its frame limit in such a layout.
TEST(PresentationLayout, ALayoutWithoutAttentionSettlesAtOnce) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("roofline"));
  app.load_model_blocking();
  app.settle();
  step(app);
  for (const char* layout : {"roofline", "cost", "sampling"}) {
    SCOPED_TRACE(layout);
    app.state().layout_request = layout;
    app.settle(3, 100);
    ASSERT_FALSE(app.last_frame().was_drawn(PanelId::kAttention));
    const uint64_t before = app.last_frame().frame;
    app.settle(3, 100);
    EXPECT_LE(app.last_frame().frame - before, 4u) << "settle() drew frames it did not need";
  }
  // The attention layout still waits for its matrix: settled means drawn.
  app.state().layout_request = "attention";
  app.settle(3, 100);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  EXPECT_TRUE(app.attention_panel().settled());
}

// The roofline's labels (the roofs' and the viewed step's) never lie on a
// point or on each other, in its own layout and beside three other panels.
TEST(PresentationLayout, RooflineLabelsKeepOffThePointsAndEachOther) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("roofline");
  o.presentation = true;
  App app(o);
  app.load_model_blocking();
  app.roofline_panel().use_measurements(fixed_roofline_measurements());
  app.settle();
  for (int i = 0; i < 6; ++i) step(app);
  app.controller().analysis()->compare_cache(*app.controller().worker(), 8, app.state().strategy);
  app.settle(4, 200);
  for (const auto& [w, h] : kSizes) {
    resize(app, w, h);
    for (const char* layout : {"roofline", "cost"}) {
      app.state().layout_request = layout;
      app.settle(3, 200);
      app.frame();
      SCOPED_TRACE(std::string(layout) + " at " + std::to_string(w) + "x" + std::to_string(h));
      ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kRoofline));
      const RooflinePanel& roof = app.roofline_panel();
      ASSERT_GT(roof.point_boxes().size(), 6u) << "the steps and the comparison's runs";
      // The viewed step, the last decode step, at the fixed share of its roof.
      EXPECT_NE(roof.step_label().find(": 15% of the roof"), std::string::npos)
          << roof.step_label();
      const auto& labels = roof.label_boxes();
      ASSERT_FALSE(labels.empty());
      for (size_t i = 0; i < labels.size(); ++i) {
        for (size_t j = i + 1; j < labels.size(); ++j)
          EXPECT_FALSE(overlap(labels[i], labels[j])) << "labels " << i << " and " << j;
        for (const RooflineBox& p : roof.point_boxes())
          EXPECT_FALSE(overlap(labels[i], p))
              << "label " << i << " lies on the point at " << p.min.x << "," << p.min.y;
      }
    }
  }
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// A guided lesson at 1280x720 on a projector: the bar keeps its strip, and
// the panel the step is about, the step control and the prompt are inside
// the window, none over another; the Choosing panel shows its table, the
// step control all of its rows. A step about another panel gives that one
// the room.
TEST(PresentationLayout, ALessonBarLeavesTheStepsPanelsRoomAt1280x720) {
  REQUIRE_DISPLAY();
  const auto dir = find_data("lessons");
  ASSERT_FALSE(dir.empty()) << "no lessons folder beside the build";
  AppOptions o = test::fixture_options("lesson");
  o.presentation = true;
  App app(o);
  app.load_model_blocking();
  app.settle();
  resize(app, 1280, 720);
  ASSERT_TRUE(app.start_lesson(dir / "2-how-sampling-chooses.lesson"));
  app.settle(4, 100);
  LessonPanel& lesson = app.lesson_panel();
  ASSERT_TRUE(lesson.active());
  step(app);  // the prefill: step 1 done
  ASSERT_TRUE(lesson.next());
  step(app);  // a decode step: step 2 done
  ASSERT_TRUE(lesson.next());
  app.settle(3, 50);
  app.frame();
  ASSERT_EQ(lesson.index(), 2);  // "Greedy takes the most likely token": the Choosing panel
  const PanelBox bar = box(app, PanelId::kLesson);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kLesson));
  for (PanelId id : {PanelId::kSampling, PanelId::kTransport, PanelId::kPrompt}) {
    expect_inside(app, id, 1280, 720);
    EXPECT_LE(box(app, id).y + box(app, id).h, bar.y + 1.0f) << panel_key(id);
  }
  const FrameRecord& r = app.last_frame();
  for (int i = 0; i < kNumWindowPanels; ++i)
    for (int j = i + 1; j < kNumWindowPanels; ++j) {
      if (!r.drawn[i] || !r.drawn[j]) continue;
      const PanelBox &a = r.boxes[i], &b = r.boxes[j];
      const bool apart = a.x + a.w <= b.x + 1 || b.x + b.w <= a.x + 1 || a.y + a.h <= b.y + 1 ||
                         b.y + b.h <= a.y + 1;
      EXPECT_TRUE(apart) << panel_key(static_cast<PanelId>(i)) << " over "
                         << panel_key(static_cast<PanelId>(j));
    }
  EXPECT_GE(app.sampling_panel().visible_rows(), SamplingPanel::kMinTableRows);
  const ImGuiWindow* step_win = ImGui::FindWindowByName(panel_title(PanelId::kTransport));
  ASSERT_NE(step_win, nullptr);
  EXPECT_LE(step_win->ScrollMax.y, 0.5f) << "the step control's rows scrolled out of view";
  // On to the last step, about the Logits panel: it takes the room.
  app.state().strategy.do_sample = true;
  app.state().strategy.temperature = 0.7f;
  app.frame();
  ASSERT_TRUE(lesson.next());
  app.state().strategy.top_p = 0.9f;
  app.frame();
  ASSERT_TRUE(lesson.next());
  ASSERT_TRUE(lesson.next());
  app.settle(3, 50);
  app.frame();
  ASSERT_EQ(lesson.index(), 5);
  expect_inside(app, PanelId::kLogits, 1280, 720);
  EXPECT_GE(box(app, PanelId::kLogits).h, box(app, PanelId::kTransport).h);
  EXPECT_LE(box(app, PanelId::kLogits).y + box(app, PanelId::kLogits).h,
            box(app, PanelId::kLesson).y + 1.0f);
  // Leaving gives the lesson's layout back without the bar.
  lesson.leave();
  app.settle(3, 50);
  app.frame();
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kLesson));
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// The status bar on a projector: every part it shows lies inside the window
// (the memory figures, the layer count and the notice give way in that
// order), also with an error shown, which always keeps its place. Before,
// the bundled model's bar ran 300 pixels past a 1280-pixel window.
TEST(PresentationLayout, TheStatusBarFitsTheWindow) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("classroom");
  o.setup.model.clear();  // the bundled model: its name and memory line are the longest
  o.presentation = true;
  App app(o);
  app.load_model_blocking();
  app.settle();
  step(app);
  step(app);
  for (const auto& [w, h] : {std::pair{1024, 768}, std::pair{1280, 720}, std::pair{1920, 1080}}) {
    resize(app, w, h);
    const std::string long_error = "--ban-words " + std::string(300, 'x') + ": no such file";
    for (const std::string& error_text :
         {std::string(), std::string("prompt: 1100 tokens, the model's context is 256"),
          long_error}) {
      const bool error = !error_text.empty();
      app.state().error_text = error_text;
      app.frame();
      app.frame();
      SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) +
                   (error ? ", error: " + error_text : ""));
      ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kStatusBar));
      EXPECT_GT(app.last_frame().status_right, 0.3f * static_cast<float>(w));
      EXPECT_LE(app.last_frame().status_right, static_cast<float>(w));
    }
  }
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// Wrapped text breaks only at blanks: ImGui's own wrap (1.86) also breaks
// after a comma, so a count wrapped at the panel's edge read "8," at the end
// of one line and "192" on the next.
TEST(PresentationLayout, WrappedTextKeepsANumberWhole) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("classroom"));
  app.frame();
  ImFont* font = ImGui::GetFont();
  const float scale = ImGui::GetFontSize() / font->FontSize;
  const std::string text = "the context holds 8,192 tokens";
  // Narrow enough to break inside "8,192", wide enough for "...holds 8,".
  const float width = ImGui::CalcTextSize("the context holds 8,").x + 1.0f;
  ASSERT_LT(width, ImGui::CalcTextSize("the context holds 8,1").x);
  // ImGui's wrap breaks after the comma here (what the class saw).
  const char* imgui_break =
      font->CalcWordWrapPositionA(scale, text.data(), text.data() + text.size(), width);
  ASSERT_EQ(std::string(text.data(), imgui_break), "the context holds 8,");
  const std::vector<std::string_view> lines = wrap_at_blanks(text, width);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "the context holds");
  EXPECT_EQ(lines[1], "8,192 tokens");
  // A number wider than a line is still cut (where it must be), losing nothing.
  const std::string wide = "12,345,678,901,234";
  const float narrow = ImGui::CalcTextSize("12,345,").x + 1.0f;
  std::string joined;
  for (std::string_view line : wrap_at_blanks(wide, narrow)) {
    EXPECT_LE(ImGui::CalcTextSize(line.data(), line.data() + line.size()).x, narrow);
    joined += line;
  }
  EXPECT_EQ(joined, wide);
  // The first line leaves the width already taken before it.
  const std::vector<std::string_view> after = wrap_at_blanks(
      "8,192 tokens", ImGui::CalcTextSize("8,192 tokens").x + 1.0f, ImGui::CalcTextSize("8,19").x);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], "8,192");
  EXPECT_EQ(after[1], "tokens");
}

// WCAG's relative luminance of a colour and the contrast of two.
double luminance(const ImVec4& c) {
  auto lin = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * lin(c.x) + 0.7152 * lin(c.y) + 0.0722 * lin(c.z);
}
ImVec4 over(const ImVec4& top, const ImVec4& below) {
  auto mix = [&](float a, float b) { return a * top.w + b * (1 - top.w); };
  return ImVec4(mix(top.x, below.x), mix(top.y, below.y), mix(top.z, below.z), 1.0f);
}
double contrast(const ImVec4& a, const ImVec4& b) {
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

// A slider's value is written over its grab: in both themes, presentation
// mode on and off, the text keeps a contrast of at least 4.5:1 (WCAG AA) with
// the grab as drawn over the slider's frame, and the grab is narrower than a
// digit (before, the dark theme's opaque blue grab hid the digit under it:
// "temperature 1.0[grab]0", "Run: [2] steps/s").
TEST(PresentationLayout, ASlidersValueStaysReadableOverItsGrab) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("classroom"));
  for (const bool light : {false, true})
    for (const bool presentation : {false, true}) {
      app.state().settings.light_theme = light;
      app.state().settings.presentation = presentation;
      app.settle(3, 50);
      app.frame();
      SCOPED_TRACE(std::string(light ? "light" : "dark") + (presentation ? ", presentation" : ""));
      ASSERT_EQ(app.window().light_theme(), light);
      const ImGuiStyle& st = ImGui::GetStyle();
      const ImVec4 frame =
          over(st.Colors[ImGuiCol_FrameBg], over(st.Colors[ImGuiCol_WindowBg], ImVec4(0, 0, 0, 1)));
      for (const ImGuiCol col : {ImGuiCol_SliderGrab, ImGuiCol_SliderGrabActive})
        EXPECT_GE(contrast(st.Colors[ImGuiCol_Text], over(st.Colors[col], frame)), 4.5)
            << ImGui::GetStyleColorName(col);
      EXPECT_LT(st.GrabMinSize, ImGui::CalcTextSize("0").x);
    }
}

// The View menu names what the classroom layout shows: every panel, or in
// presentation mode the panels its projector arrangement keeps (before, it
// promised "every panel" and F11 showed four).
TEST(PresentationLayout, TheClassroomMenuEntryNamesThePanelsItShows) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("classroom"));
  load_and_step_twice(app);
  for (const bool presentation : {true, false})
    for (const auto& [w, h] : kSizes) {
      app.state().settings.presentation = presentation;
      resize(app, w, h);
      app.state().layout_request = "classroom";
      app.settle(3, 50);
      app.frame();
      SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) +
                   (presentation ? ", presentation" : ""));
      std::string label = classroom_layout_label(presentation);
      std::transform(label.begin(), label.end(), label.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      const bool every = label.find("every panel") != std::string::npos;
      for (int i = 0; i < kNumWindowPanels; ++i) {
        const PanelId id = static_cast<PanelId>(i);
        if (!Settings::classroom_open()[i]) continue;
        const bool drawn = app.last_frame().was_drawn(id);
        if (every) {
          EXPECT_TRUE(drawn) << panel_key(id) << " missing under \"" << label << "\"";
          continue;
        }
        // Named by its title's first word ("prompt", "step", "attention").
        std::string word = panel_title(id);
        word = word.substr(0, word.find(' '));
        std::transform(word.begin(), word.end(), word.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        EXPECT_EQ(drawn, label.find(word) != std::string::npos)
            << panel_key(id) << " under \"" << label << "\"";
      }
    }
}

// Presentation mode on, then off again: the Choosing panel's controls are
// folded exactly when they were before, also after Choosing was shown alone
// in presentation mode (its controls measured in the projector's large font).
// Before, at the default 1600x900 the classroom's controls stayed folded
// after F11 was switched off.
TEST(PresentationLayout, ChoosingUnfoldsAgainAfterPresentationMode) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("lesson"));
  load_and_step_twice(app);
  auto apply = [&](const char* layout) {
    app.state().layout_request = layout;
    app.settle(3, 50);
    app.frame();
  };
  auto set_presentation = [&](bool on) {
    app.state().settings.presentation = on;
    app.settle(3, 50);
    app.frame();
    app.frame();
  };
  for (const auto& [w, h] : {std::pair{1024, 768}, {1280, 720}, {1600, 900}, {1920, 1080}})
    for (const char* layout : {"lesson", "sampling", "classroom"}) {
      SCOPED_TRACE(std::string(layout) + " at " + std::to_string(w) + "x" + std::to_string(h));
      set_presentation(false);
      resize(app, w, h);
      apply(layout);
      ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
      const bool folded = app.sampling_panel().controls_folded();
      // F11 with Choosing alone, then this layout, then F11 off.
      set_presentation(true);
      apply("sampling");
      apply(layout);
      set_presentation(false);
      apply(layout);
      ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
      EXPECT_EQ(app.sampling_panel().controls_folded(), folded);
      // F11 on and off in this layout.
      set_presentation(true);
      set_presentation(false);
      ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
      EXPECT_EQ(app.sampling_panel().controls_folded(), folded);
    }
}

}  // namespace
}  // namespace ts::app
