#pragma once
// The lesson bar: a guided lesson (assets/lessons/*.lesson, docs/lessons.md)
// one step at a time. It shows "step n of N", the words to read, what the
// class must do to go on, an optional question with its answer, Back / Next /
// Leave, and outlines the panel the step is about (opening it if closed).
// Next stays disabled until the step's action has been done; reading steps
// (action "next") can go on at once. A lesson starts the session over (its
// prompt, nothing generated, one greedy lane, the KV cache on), so that it
// finds what its text describes whatever ran before it. While a lesson runs, the window keeps a
// strip at the bottom for the bar and the other panels share the rest.
#include <memory>
#include <string>
#include <vector>

#include "app/panels/panel.h"
#include "lesson/lesson.h"

namespace ts::app {

// The panel keys and layout names a lesson file may use.
lesson::Vocabulary lesson_vocabulary();

class LessonPanel : public Panel {
 public:
  static constexpr const char* kHelp =
      "A guided lesson: read the step, do what it asks (Next is enabled once it is done), "
      "then Next. The outlined panel is the one the step is about. Lessons > Leave lesson, or "
      "the Leave button, ends it at any time; the model stays where it is. Lessons are text "
      "files in the lessons folder (docs/lessons.md describes the format).";

  void draw(PanelContext& ctx) override;

  // Starts `l` at its first step, replacing any lesson shown; its prompt and
  // layout are applied at the next frame.
  void start(lesson::Lesson l);
  void leave();
  bool active() const { return lesson_ != nullptr; }
  const lesson::Lesson* lesson() const { return lesson_.get(); }
  int index() const { return index_; }
  int count() const { return lesson_ ? static_cast<int>(lesson_->steps.size()) : 0; }
  // Whether the current step's action has been done (Next is enabled).
  bool action_done() const { return done_; }
  // Next / Back as the buttons do them; false when refused (Next before the
  // action is done, or past the ends).
  bool next();
  bool back();
  // Outlines the panel the step is about; called after every panel is drawn
  // (their boxes for this frame are then known).
  void draw_outline(PanelContext& ctx);
  // The panel the last frame outlined; kStatusBar: none.
  PanelId outlined() const { return outlined_; }
  // Height of the bar the window keeps for it while a lesson runs.
  static float bar_height(float work_height);
  // The panel the current step is about, for the layout (make_layout's
  // lesson_subject): the step's own panel, or for a step about the prompt or
  // the step control the next step's other panel (else the previous one's),
  // so the arrangement changes only where the class must look elsewhere.
  // kPrompt when no step names another panel; kStatusBar when no lesson runs.
  PanelId layout_subject() const;

 private:
  bool start_over(PanelContext& ctx);
  void enter_step(PanelContext& ctx);
  void check_action(PanelContext& ctx);

  std::unique_ptr<lesson::Lesson> lesson_;
  int index_ = 0;
  bool entered_ = false;  // the step's baseline is taken (at the first frame that shows it)
  bool started_ = false;  // the lesson's prompt and layout are applied
  bool done_ = false;
  bool close_ = false;        // left: close the bar at the next frame
  std::string close_layout_;  // left: the lesson's layout, applied again without the bar
  PanelId laid_subject_ = PanelId::kStatusBar;  // the subject the layout was last applied for
  ImVec2 laid_size_{};                          // the window's size when it was last applied
  PanelId outlined_ = PanelId::kStatusBar;
  std::vector<bool> completed_;  // per step: its action was done
  bool show_answer_ = false;
  // What the state was when the step began, to see what the class changed.
  int base_history_ = 0;
  int base_query_ = -1;
  const void* base_comparison_ = nullptr;
  int base_comparisons_ = 0;
  int base_sweeps_ = 0;
};

}  // namespace ts::app
