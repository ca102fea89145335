#pragma once
// Every window panel, declared once, one row each, in View-menu order:
//
//   X(Id, "key", "Title", Class, Classroom(x0, y0, x1, y1), open in classroom)
//
// Id       PanelId::k<Id>, the name the code uses.
// key      stable name: imgui.ini saves the open panels by it, --layout KEY
//          shows that panel alone, File > Save panel as PNG names files by
//          it. Reordering rows or renaming titles keeps users' settings.
// Title    the window's title (ImGui also keys the window's saved position
//          and size by it).
// Class    the panel (its own panels/<key>.{h,cpp}): draw(PanelContext&) and
//          kHelp, the text of its "?" button and of Help > The panels.
// Classroom  where the default layout puts it, as fractions of the work area
//          (the window minus the menu and status bars); the analysis panels
//          and Help float over the middle when opened.
//
// Adding a panel: its own files, one row here and its #include in
// panel_table.cpp. The rows expand into PanelId (app_state.h), the titles
// and keys (app_state.cpp) and the factory (panel_table.cpp).
#define TS_PANEL_LIST(X)                                                                          \
  X(Prompt, "prompt", "Prompt & tokens", PromptPanel, Classroom(0, 0, 0.635f, 0.22f), true)       \
  X(Transport, "transport", "Step control", TransportPanel, Classroom(0.635f, 0, 1, 0.22f), true) \
  X(Attention, "attention", "Attention", AttentionPanel, Classroom(0, 0.22f, 0.37f, 1), true)     \
  X(KvCache, "kv", "KV cache", KvCachePanel, Classroom(0.37f, 0.67f, 0.635f, 1), true)            \
  X(Logits, "logits", "Logits", LogitsPanel, Classroom(0.37f, 0.22f, 0.635f, 0.67f), true)        \
  X(Sampling, "sampling", "Choosing the next token", SamplingPanel,                               \
    Classroom(0.635f, 0.22f, 1, 0.67f), true)                                                     \
  X(Timeline, "timeline", "Timeline", TimelinePanel, Classroom(0.635f, 0.67f, 1, 1), true)        \
  X(Roofline, "roofline", "Roofline", RooflinePanel, Classroom(0.2f, 0.15f, 0.8f, 0.85f), false)  \
  X(LogitLens, "lens", "Logit lens", LogitLensPanel, Classroom(0.3f, 0.2f, 0.8f, 0.8f), false)    \
  X(CacheCompare, "cache", "KV cache on vs off", CacheComparePanel,                               \
    Classroom(0.2f, 0.15f, 0.8f, 0.85f), false)                                                   \
  X(Rope, "rope", "RoPE: rotary positions", RopePanel, Classroom(0.2f, 0.1f, 0.8f, 0.9f), false)  \
  X(Lanes, "lanes", "Lanes: strategies side by side", LanesPanel,                                 \
    Classroom(0.15f, 0.15f, 0.85f, 0.85f), false)                                                 \
  X(Speculative, "spec", "Speculative decoding", SpeculativePanel,                                \
    Classroom(0.15f, 0.1f, 0.85f, 0.9f), false)                                                   \
  X(Lookahead, "lookahead", "Lookahead & prompt lookup", LookaheadPanel,                          \
    Classroom(0.15f, 0.1f, 0.85f, 0.9f), false)                                                   \
  X(Precision, "precision", "Compare: two formats or two models", PrecisionPanel,                 \
    Classroom(0.1f, 0.1f, 0.9f, 0.9f), false)                                                     \
  X(Score, "score", "Score a text", ScorePanel, Classroom(0.15f, 0.15f, 0.85f, 0.85f), false)     \
  X(Quiz, "quiz", "Guess the next token", QuizPanel, Classroom(0.2f, 0.1f, 0.8f, 0.7f), false)    \
  X(Help, "help", "Help", HelpPanel, Classroom(0.25f, 0.1f, 0.75f, 0.9f), false)                  \
  X(Lesson, "guided", "Guided lesson", LessonPanel, Classroom(0, 0.72f, 1, 1), false)
