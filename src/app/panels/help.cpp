#include "app/panels/help.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "app/panels/help_text.h"
#include "app/panels/panel_table.h"
#include "app/panels/transport.h"
#include "app/ui_util.h"
#include "session/memory_report.h"

namespace ts::app {

const char* const HelpPanel::kHelp =
    "Short explanations of prefill, decode, the KV cache and each decoding strategy.";

void HelpPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kHelp)) return;
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(
      "TokenScope shows what one GPT-2 step really computes. The model pauses "
      "after the prompt's prefill and after every decode step.");
  ImGui::PopTextWrapPos();
  ImGui::Spacing();
  for (int i = 0; i < kNumHelpTopics; ++i) {
    const HelpTopic& t = help_topic(i);
    if (ImGui::CollapsingHeader(t.title, i < 3 ? ImGuiTreeNodeFlags_DefaultOpen : 0)) {
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextUnformatted(t.text);
      ImGui::PopTextWrapPos();
    }
  }
  if (ImGui::CollapsingHeader("The panels")) {
    for (int i = 0; i < kNumWindowPanels; ++i) {
      const PanelId id = static_cast<PanelId>(i);
      if (id == PanelId::kHelp) continue;
      ImGui::TextUnformatted(panel_title(id));
      ImGui::Indent();
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextDisabled("%s", panel_help(id));
      ImGui::PopTextWrapPos();
      ImGui::Unindent();
    }
  }
  end_panel();
}

float StatusBar::height() {
  return ImGui::GetFrameHeight() + ImGui::GetStyle().WindowPadding.y * 2;
}

void StatusBar::draw(PanelContext& ctx, const StatusInfo& info) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const float h = height();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x, vp->WorkPos.y + vp->WorkSize.y - h));
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x, h));
  const ImGuiWindowFlags flags =
      ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
      ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::PushStyleColor(ImGuiCol_WindowBg, ImGui::GetStyle().Colors[ImGuiCol_MenuBarBg]);
  if (ImGui::Begin(panel_title(PanelId::kStatusBar), nullptr, flags)) {
    ctx.record.mark(PanelId::kStatusBar);
    ImGui::AlignTextToFramePadding();
    // What the right end keeps: the error (with its dismiss button) or the
    // notice; the optional parts below give way to it, so nothing is cut off
    // at the window's edge (a projector's 1024 or 1280 pixels).
    const float right_edge = ImGui::GetWindowContentRegionMax().x;
    const float gap = ImGui::GetStyle().ItemSpacing.x;
    float reserved = 0;
    if (!ctx.state.error_text.empty()) {
      // A long error keeps 60% of the bar and is cut to it.
      reserved = std::min(right_edge * 0.6f,
                          ImGui::CalcTextSize(("error: " + ctx.state.error_text).c_str()).x +
                              ImGui::CalcTextSize("dismiss").x +
                              ImGui::GetStyle().FramePadding.x * 2 + gap * 2);
    } else if (!ctx.state.notice.empty()) {
      reserved = ImGui::CalcTextSize(ctx.state.notice.c_str()).x + gap;
    }
    // True when `text` fits after the last item with `reserved` kept free.
    const auto fits = [&](const std::string& text) {
      return ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x + gap +
                 ImGui::CalcTextSize(text.c_str()).x + reserved <=
             right_edge;
    };
    if (ctx.snap) {
      const SessionSnapshot& s = *ctx.snap;
      const bool gpu = s.backend != "cpu";
      const std::string where = TransportPanel::where_text(s);
      char shape[64];
      std::snprintf(shape, sizeof shape, "%d layers \u00D7 %d heads", s.config.n_layer,
                    s.config.n_head);
      // The badge and the model's name always show; then, as room allows,
      // where the session is, the device and the model's shape (the menu bar
      // and the tooltips repeat them).
      const float sep = ImGui::CalcTextSize("|").x + gap * 2;
      float room = right_edge - ImGui::GetCursorPosX() - reserved -
                   (ImGui::CalcTextSize("CPU").x + ImGui::GetStyle().FramePadding.x * 2 + gap) -
                   ImGui::CalcTextSize(s.model_name.c_str()).x;
      const auto take = [&room](float width) {
        if (width > room) return false;
        room -= width;
        return true;
      };
      const bool show_where = take(ImGui::CalcTextSize(where.c_str()).x + sep);
      const bool show_device = take(ImGui::CalcTextSize(s.device.c_str()).x + sep);
      const bool show_shape = take(ImGui::CalcTextSize(shape).x + gap);
      badge(gpu ? "GPU" : "CPU", gpu ? ctx.pal.bar : ctx.pal.prompt, ctx.pal.text);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s \u00B7 %s", s.backend.c_str(), s.device.c_str());
      if (show_device) {
        // The badge names the backend: the device is enough beside it.
        ImGui::SameLine();
        ImGui::TextUnformatted(s.device.c_str());
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("%s \u00B7 %s", s.backend.c_str(), s.device.c_str());
        ImGui::SameLine();
        ImGui::TextDisabled("|");
      }
      ImGui::SameLine();
      ImGui::Text("%s", s.model_name.c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "%s parameters, %d layers \u00D7 %d heads, %d-dim embeddings, context %d, vocabulary "
            "%d",
            format_count(s.config.parameter_count()).c_str(), s.config.n_layer, s.config.n_head,
            s.config.n_embd, s.config.n_ctx, s.config.vocab_size);
      if (show_shape) {
        ImGui::SameLine();
        ImGui::TextDisabled("%s", shape);
      }
      if (show_where) {
        ImGui::SameLine();
        ImGui::TextDisabled("|");
        ImGui::SameLine();
        ImGui::TextUnformatted(where.c_str());
      }
      // Load time and where memory goes: as much as fits, every part on hover
      // (a reopened session holds no model: its notice says so instead).
      if (!ctx.ctl.replaying()) {
        char load[64];
        std::snprintf(load, sizeof load, "load %.2f s + warm-up %.2f s", ctx.ctl.load_seconds(),
                      ctx.ctl.warmup_seconds());
        const std::string memory = memory_report_short(s.memory);
        const std::string full = std::string(load) + " | " + memory;
        const std::string rss = memory.substr(0, memory.find(':'));
        // The fps counter and the notice marker keep a few characters.
        const float keep = ImGui::GetFontSize() * (s.notice.empty() ? 4.0f : 8.0f);
        reserved += keep;
        const std::string* shown = fits("| " + full)     ? &full
                                   : fits("| " + memory) ? &memory
                                   : fits("| " + rss)    ? &rss
                                                         : nullptr;
        reserved -= keep;
        if (shown != nullptr) {
          ImGui::SameLine();
          ImGui::TextDisabled("|");
          ImGui::SameLine();
          ImGui::TextUnformatted(shown->c_str());
          if (ImGui::IsItemHovered()) {
            std::string tip = std::string(load) + " (neither is in any step's time)\n";
            for (const std::string& line : memory_report_lines(s.memory)) tip += line + "\n";
            ImGui::SetTooltip("%s", tip.c_str());
          }
        }
      }
      if (!s.notice.empty()) {
        // In full when it fits, else a marker with the text on hover.
        const std::string full = "\u25B2 " + s.notice;
        const char* shown = fits(full)            ? full.c_str()
                            : fits("\u25B2 note") ? "\u25B2 note"
                                                  : nullptr;
        if (shown != nullptr) {
          ImGui::SameLine();
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.warning), "%s", shown);
          if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.notice.c_str());
        }
      }
    } else if (ctx.ctl.loading()) {
      ImGui::Text("loading %s ...", ctx.ctl.loading_what().c_str());
    } else {
      ImGui::TextDisabled("no model loaded");
    }
    if (!info.notices.empty()) {
      ImGui::SameLine();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.warning), "\u25B2 %s",
                         info.notices.c_str());
    }
    // Errors: red, at the right, until dismissed; the session kept its state.
    if (!ctx.state.error_text.empty()) {
      ImGui::SameLine();
      // Cut to the room left (the whole message on hover).
      const float dismiss = ImGui::CalcTextSize("dismiss").x + ImGui::GetStyle().FramePadding.x * 2;
      const float left =
          right_edge - (ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x) - gap * 2 - dismiss;
      const std::string full = "error: " + ctx.state.error_text;
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s",
                         fit_text(full, left).c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\nNothing changed: the session is as it was before this command.",
                          full.c_str());
      ImGui::SameLine();
      if (ImGui::SmallButton("dismiss")) ctx.state.error_text.clear();
    } else if (!ctx.state.notice.empty()) {
      ImGui::SameLine();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.ok), "%s",
                         ctx.state.notice.c_str());
    }
    ctx.record.status_right = ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x;
    char fps[32];
    std::snprintf(fps, sizeof(fps), "%.0f fps", info.fps);
    const float w = ImGui::CalcTextSize(fps).x;
    ImGui::SameLine();
    if (ImGui::GetCursorPosX() + w + 10 < ImGui::GetWindowContentRegionMax().x) {
      ImGui::SameLine(ImGui::GetWindowContentRegionMax().x - w);
      ImGui::TextDisabled("%s", fps);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", info.renderer.c_str());
    } else {
      ImGui::NewLine();
    }
  }
  ImGui::End();
  ImGui::PopStyleColor();
}

}  // namespace ts::app
