#include "app/panels/guided.h"

#include <algorithm>
#include <cmath>

#include "app/layout.h"
#include "util/paths.h"

namespace ts::app {

lesson::Vocabulary lesson_vocabulary() {
  lesson::Vocabulary v;
  for (int i = 0; i < kNumWindowPanels; ++i) v.panels.push_back(panel_key(static_cast<PanelId>(i)));
  v.layouts = layout_names();
  // A bare compare_model name: the models folders beside the bundled model's.
  for (const std::filesystem::path& d : data_dirs()) v.model_dirs.push_back(d / "models");
  return v;
}

void LessonPanel::start(lesson::Lesson l) {
  lesson_ = std::make_unique<lesson::Lesson>(std::move(l));
  index_ = 0;
  entered_ = false;
  started_ = false;
  done_ = false;
  show_answer_ = false;
  completed_.assign(lesson_->steps.size(), false);
}

void LessonPanel::leave() {
  close_ = lesson_ != nullptr;  // the bar closes at the next frame
  close_layout_ = lesson_ ? lesson_->layout : std::string();
  lesson_.reset();
  index_ = 0;
  entered_ = started_ = done_ = show_answer_ = false;
}

bool LessonPanel::next() {
  if (!lesson_ || !done_ || index_ + 1 >= count()) return false;
  ++index_;
  entered_ = false;
  return true;
}

bool LessonPanel::back() {
  if (!lesson_ || index_ == 0) return false;
  --index_;
  entered_ = false;
  return true;
}

PanelId LessonPanel::layout_subject() const {
  if (!lesson_) return PanelId::kStatusBar;
  auto other_panel = [&](int i, PanelId& out) {
    const std::string& key = lesson_->steps[i].panel;
    return !key.empty() && parse_panel_key(key, out) && out != PanelId::kPrompt &&
           out != PanelId::kTransport && out != PanelId::kLesson;
  };
  PanelId id;
  if (other_panel(index_, id)) return id;
  for (int i = index_ + 1; i < count(); ++i)
    if (other_panel(i, id)) return id;
  for (int i = index_ - 1; i >= 0; --i)
    if (other_panel(i, id)) return id;
  return PanelId::kPrompt;
}

float LessonPanel::bar_height(float work_height) {
  const float lines = ImGui::GetTextLineHeightWithSpacing() * 7.0f;
  return std::min(lines + ImGui::GetStyle().WindowPadding.y * 2, work_height * 0.32f);
}

bool LessonPanel::start_over(PanelContext& ctx) {
  AppState& st = ctx.state;
  st.lane_setup = {SamplingParams{}};
  st.lane = 0;
  st.strategy = SamplingParams{};
  st.strategy_synced = true;
  st.strategy_error.clear();
  st.pending_lane = -1;
  st.view_step = -1;
  st.attention.query = -1;
  // A model still loading starts so too.
  ctx.ctl.strategies_on_load = st.lane_setup;
  ctx.ctl.session_options.kv_cache = true;
  // The lesson's model beside the session's: the Compare panel set up for
  // it, run when the class presses Run.
  if (!lesson_->compare_model.empty()) st.compare_model_request = lesson_->compare_model;
  if (!ctx.snap || !ctx.ctl.worker()) return false;
  ctx.ctl.pause();
  ctx.ctl.reset(st.lane_setup);
  ctx.ctl.set_kv_cache(true);
  if (!lesson_->prompt.empty() && ctx.snap->prompt_text != lesson_->prompt) {
    ctx.ctl.set_prompt(lesson_->prompt, st.lane_setup);
    st.prompt_edit_synced = false;
  }
  // Reset, the cache switch and the prompt are quick: done before the first
  // step is checked, so that it never counts the previous lesson's steps.
  ctx.ctl.worker()->wait_idle();
  return true;
}

void LessonPanel::enter_step(PanelContext& ctx) {
  entered_ = true;
  done_ = completed_[index_];  // a step done once stays done (Back, then Next again)
  show_answer_ = false;
  const lesson::Step& s = lesson_->steps[index_];
  PanelId id;
  if (!s.panel.empty() && parse_panel_key(s.panel, id)) ctx.state.settings.panel_open(id) = true;
  base_history_ = ctx.snap ? static_cast<int>(ctx.snap->history.size()) : 0;
  base_query_ = ctx.state.attention.query;
  base_comparisons_ = ctx.state.comparisons_finished;
  base_sweeps_ = ctx.state.batch_sweeps_finished;
  base_comparison_ = ctx.ctl.analysis()
                         ? static_cast<const void*>(ctx.ctl.analysis()->cache_comparison().get())
                         : nullptr;
}

void LessonPanel::check_action(PanelContext& ctx) {
  if (done_) return;  // once done, a step stays done (going back and forth keeps Next on)
  const lesson::Action& a = lesson_->steps[index_].action;
  const SamplingParams& p = ctx.state.strategy;
  const int history = ctx.snap ? static_cast<int>(ctx.snap->history.size()) : 0;
  // Stepping back and forth: a step counts from the lowest point reached.
  if (a.kind == lesson::ActionKind::kStep) base_history_ = std::min(base_history_, history);
  switch (a.kind) {
    case lesson::ActionKind::kNext:
      done_ = true;
      break;
    case lesson::ActionKind::kStep:
      done_ = history > base_history_;
      break;
    case lesson::ActionKind::kPrefill:
      done_ = history >= 1;
      break;
    case lesson::ActionKind::kBack:
      done_ = history < base_history_;
      break;
    case lesson::ActionKind::kGreedy:
      done_ = !p.do_sample && !p.beam_search();
      break;
    case lesson::ActionKind::kTemperature:
      done_ = p.do_sample && std::abs(p.temperature - a.value) < 0.005;
      break;
    case lesson::ActionKind::kTopP:
      done_ = p.do_sample && std::abs(p.top_p - a.value) < 0.005;
      break;
    case lesson::ActionKind::kTopK:
      done_ = p.do_sample && p.top_k == static_cast<int>(a.value);
      break;
    case lesson::ActionKind::kKvCache:
      done_ = ctx.snap && ctx.snap->kv_cache == a.on;
      break;
    case lesson::ActionKind::kClickToken:
      done_ = ctx.state.attention.query >= 0 && ctx.state.attention.query != base_query_;
      break;
    case lesson::ActionKind::kCacheCompare: {
      const void* now = ctx.ctl.analysis()
                            ? static_cast<const void*>(ctx.ctl.analysis()->cache_comparison().get())
                            : nullptr;
      done_ = now != nullptr && now != base_comparison_;
      break;
    }
    case lesson::ActionKind::kCompare:
      done_ = ctx.state.comparisons_finished > base_comparisons_;
      break;
    case lesson::ActionKind::kBatchSweep:
      done_ = ctx.state.batch_sweeps_finished > base_sweeps_;
      break;
  }
  completed_[index_] = done_;
}

void LessonPanel::draw_outline(PanelContext& ctx) {
  outlined_ = PanelId::kStatusBar;
  if (!lesson_) return;
  const lesson::Step& s = lesson_->steps[index_];
  PanelId id;
  if (s.panel.empty() || !parse_panel_key(s.panel, id)) return;
  if (!ctx.record.was_drawn(id)) return;
  outlined_ = id;
  const PanelBox& b = ctx.record.boxes[static_cast<int>(id)];
  const float t = 3.0f * ctx.scale;
  ImGui::GetForegroundDrawList()->AddRect(ImVec2(b.x + t * 0.5f, b.y + t * 0.5f),
                                          ImVec2(b.x + b.w - t * 0.5f, b.y + b.h - t * 0.5f),
                                          ctx.pal.accent, 4.0f * ctx.scale, 0, t);
}

void LessonPanel::draw(PanelContext& ctx) {
  if (close_) {
    ctx.state.settings.panel_open(PanelId::kLesson) = false;
    close_ = false;
    // The lesson's layout again, in its form without the bar.
    if (!close_layout_.empty() && ctx.state.layout_request.empty())
      ctx.state.layout_request = close_layout_;
    close_layout_.clear();
    laid_subject_ = PanelId::kStatusBar;
  }
  if (lesson_) {
    // This frame's snapshot is from before a restart: the first step begins at the next.
    bool stale = false;
    if (!started_) {
      started_ = true;
      laid_subject_ = layout_subject();
      laid_size_ = ImGui::GetMainViewport()->Size;
      if (!lesson_->layout.empty()) ctx.state.layout_request = lesson_->layout;
      stale = start_over(ctx);
    }
    ctx.state.settings.panel_open(PanelId::kLesson) = true;
    if (!stale) {
      if (!entered_) enter_step(ctx);
      // A step about another panel, or a window of another size (a short
      // one shows fewer panels, one that grew all of them again): the
      // lesson's layout again, arranged for it.
      const PanelId subject = layout_subject();
      const ImVec2 size = ImGui::GetMainViewport()->Size;
      if ((subject != laid_subject_ || size.x != laid_size_.x || size.y != laid_size_.y) &&
          !lesson_->layout.empty()) {
        laid_subject_ = subject;
        laid_size_ = size;
        ctx.state.layout_request = lesson_->layout;
      }
      check_action(ctx);
    }
  }
  if (!begin_panel(ctx, PanelId::kLesson, ImGuiWindowFlags_NoCollapse)) return;
  if (!lesson_) {
    dim_text_wrapped(
        "No lesson running. Choose one from the Lessons menu (or start the window with "
        "--lesson FILE); a lesson walks the class through the panels one step at a time.");
    end_panel();
    return;
  }
  const lesson::Step& s = lesson_->steps[index_];
  const int n = count();
  // First line: where we are and the commands, always reachable.
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "%s", lesson_->title.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("step %d of %d", index_ + 1, n);
  ImGui::SameLine();
  ImGui::BeginDisabled(index_ == 0);
  if (ImGui::Button("< Back")) back();
  ImGui::EndDisabled();
  ImGui::SameLine();
  const bool last = index_ + 1 >= n;
  ImGui::BeginDisabled(!done_ || last);
  if (ImGui::Button("Next >")) next();
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled) && !done_)
    ImGui::SetTooltip("first: %s", lesson::action_request(s.action).c_str());
  ImGui::SameLine();
  if (ImGui::Button(last && done_ ? "Finish" : "Leave")) {
    leave();
    end_panel();
    return;
  }
  panel_help_button(PanelId::kLesson);
  ImGui::Separator();
  long_text_wrapped(s.text);
  if (s.action.kind != lesson::ActionKind::kNext) {
    if (done_)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.ok), "\u2714 done%s",
                         last ? "" : ": Next when the class is ready");
    else
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.warning), "To go on: %s",
                         lesson::action_request(s.action).c_str());
  }
  if (!s.question.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::Text("Question: %s", s.question.c_str());
    ImGui::PopTextWrapPos();
    if (!s.answer.empty()) {
      if (show_answer_) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("Answer: %s", s.answer.c_str());
        ImGui::PopTextWrapPos();
      } else if (ImGui::SmallButton("Show the answer")) {
        show_answer_ = true;
      }
    }
  }
  end_panel();
}

}  // namespace ts::app
