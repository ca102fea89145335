// File > Export for slides under Xvfb: the attention SVG's cell colours are
// the colours the window draws (sampled at the cell centres of the panel's
// PNG, at 1x and at 2x), the 2x PNG is twice the panel's size on screen and
// drawn again (not magnified), a bad path leaves everything as it was,
// every fill and stroke of every SVG the window writes is a colour, and the
// KV blocks' shared row and the attention legend's ticks are the panels'.
#include <gtest/gtest.h>
#include <stb_image.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../unit/svg_check.h"
#include "app/app.h"
#include "gui_test_support.h"
#include "util/error.h"
#include "util/svg_writer.h"

namespace ts::app {
namespace {

namespace fs = std::filesystem;

struct Image {
  int w = 0, h = 0;
  std::vector<uint8_t> px;  // RGBA
  Rgb8 at(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * w + x) * 4;
    return Rgb8{px[i], px[i + 1], px[i + 2]};
  }
};

Image load_png(const std::string& path) {
  Image img;
  int n = 0;
  unsigned char* p = stbi_load(path.c_str(), &img.w, &img.h, &n, 4);
  if (!p) return img;
  img.px.assign(p, p + static_cast<size_t>(img.w) * img.h * 4);
  stbi_image_free(p);
  return img;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fills of the rectangles inside <g id="cells">, in document order
// (row-major); empty when the file is not well-formed XML.
std::vector<std::string> cell_fills(const std::string& svg, std::string& error) {
  const ts::test::ParseResult doc = ts::test::parse_xml(svg);
  error = doc.error;
  std::vector<std::string> fills;
  const ts::test::Element* cells = doc.root ? doc.root->by_id("cells") : nullptr;
  if (!error.empty() || !cells) return fills;
  for (const ts::test::Element* r : cells->all("rect")) fills.push_back(r->attr("fill"));
  return fills;
}

// Every unmasked cell's centre in `img` (the heatmap at `box`, n x n cells)
// has the SVG's fill for that cell. Returns how many cells were compared.
int compare_cells(const Image& img, const PanelBox& box, int n,
                  const std::vector<std::string>& fills, const std::string& what) {
  const float cell = box.w / static_cast<float>(n);
  int compared = 0;
  for (int q = 0; q < n; ++q)
    for (int k = 0; k <= q; ++k) {
      const int x = static_cast<int>(std::floor(box.x + (k + 0.5f) * cell));
      const int y = static_cast<int>(std::floor(box.y + (q + 0.5f) * cell));
      if (x < 0 || y < 0 || x >= img.w || y >= img.h) {
        ADD_FAILURE() << what << ": cell " << q << "," << k << " outside the PNG";
        return compared;
      }
      const Rgb8 c = img.at(x, y);
      EXPECT_EQ(svg_color(c.r, c.g, c.b), fills[static_cast<size_t>(q) * n + k])
          << what << ": cell " << q << "," << k << " at pixel " << x << "," << y;
      ++compared;
    }
  return compared;
}

TEST(GuiExport, AttentionSvgCellColoursEqualThePanelsPngAt1xAnd2x) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("lesson", "The cat sat on the mat and"));
  app.load_model_blocking();
  app.settle();
  app.advance();  // prefill
  app.settle(2, 100);
  app.advance();  // one decode step: the outlined new row
  app.settle(2, 100);
  app.state().attention.layer = 1;
  app.state().attention.head = 2;
  app.settle(2, 100);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  const AttentionMatrix& m = app.attention_panel().matrix();
  ASSERT_TRUE(m.complete);
  const int n = m.n;
  ASSERT_GT(n, 4);

  const fs::path dir = fs::temp_directory_path() / ("ts-export-gui-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path svg_path = dir / "attention.svg";
  ASSERT_TRUE(app.export_to(ExportKind::kAttentionSvg, svg_path.string()))
      << app.state().error_text;
  EXPECT_EQ(app.state().notice, "wrote " + svg_path.string());
  const std::vector<std::string> bad = ts::test::bad_paints(read_file(svg_path));
  EXPECT_TRUE(bad.empty()) << "attributes that are not colours:\n" << ts::test::paint_report(bad);
  std::string error;
  const std::vector<std::string> fills = cell_fills(read_file(svg_path), error);
  ASSERT_TRUE(error.empty()) << "the SVG is not well-formed XML: " << error;
  ASSERT_EQ(fills.size(), static_cast<size_t>(n) * n);

  // 1x: the panel as it is on screen.
  const PanelBox panel = app.last_frame().boxes[static_cast<int>(PanelId::kAttention)];
  PanelBox heat = app.attention_panel().heatmap_box();
  heat.x -= std::floor(panel.x);
  heat.y -= std::floor(panel.y);
  const fs::path png1 = dir / "attention.png";
  app.write_panel_screenshot(PanelId::kAttention, png1.string());
  const Image one = load_png(png1.string());
  ASSERT_GT(one.w, 0);
  EXPECT_EQ(compare_cells(one, heat, n, fills, "1x"), n * (n + 1) / 2);

  // 2x: drawn again at twice the size.
  const fs::path png2 = dir / "attention@2x.png";
  const App::PanelCapture cap = app.write_panel_png_scaled(PanelId::kAttention, png2.string(), 2);
  const Image two = load_png(png2.string());
  ASSERT_GT(two.w, 0);
  EXPECT_EQ(two.w, cap.width);
  EXPECT_EQ(two.h, cap.height);
  EXPECT_EQ(two.w, 2 * one.w);
  EXPECT_EQ(two.h, 2 * one.h);
  // The heatmap itself is at least twice as large (whole pixels per cell).
  EXPECT_GE(cap.heatmap.w, 2 * heat.w - 1);
  EXPECT_EQ(compare_cells(two, cap.heatmap, n, fills, "2x"), n * (n + 1) / 2);
  // Not a magnified 1x picture: text rasterised at 2x has edges that a
  // pixel-doubled 1x image cannot have (2x2 blocks of one colour).
  int odd_blocks = 0;
  for (int y = 0; y + 1 < two.h; y += 2)
    for (int x = 0; x + 1 < two.w; x += 2)
      if (!(two.at(x, y) == two.at(x + 1, y) && two.at(x, y) == two.at(x, y + 1) &&
            two.at(x, y) == two.at(x + 1, y + 1)))
        ++odd_blocks;
  EXPECT_GT(odd_blocks, 500);
  // And the window is back at 1x, the same panel in the same place.
  app.settle(1, 10);
  EXPECT_EQ(app.window().render_scale(), 1.0f);
  const PanelBox after = app.last_frame().boxes[static_cast<int>(PanelId::kAttention)];
  EXPECT_NEAR(after.x, panel.x, 1.0f);
  EXPECT_NEAR(after.w, panel.w, 1.0f);
  EXPECT_NEAR(after.h, panel.h, 1.0f);
  fs::remove_all(dir);
}

TEST(GuiExport, BadPathsGiveOneLineAndChangeNothing) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("classroom"));
  app.load_model_blocking();
  app.settle();
  // Before prefill there is nothing to export.
  EXPECT_FALSE(app.export_to(ExportKind::kLogitsCsv, "x.csv"));
  EXPECT_EQ(app.state().error_text, "nothing to export yet: run prefill first (Space)");
  app.advance();
  app.settle(2, 100);
  const fs::path dir = fs::temp_directory_path() / ("ts-export-bad-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "logits.csv";
  ASSERT_TRUE(app.export_to(ExportKind::kLogitsCsv, file.string())) << app.state().error_text;
  const std::string before = read_file(file);
  const size_t steps = app.controller().snapshot()->history.size();
  for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
           {"", "no file name given"},
           {dir.string(), dir.string() + ": is a directory"},
           {(dir / "missing" / "x.svg").string(), "cannot open for writing"}}) {
    EXPECT_FALSE(app.export_to(ExportKind::kLogitsSvg, path));
    EXPECT_NE(app.state().error_text.find(message), std::string::npos) << app.state().error_text;
    EXPECT_EQ(app.state().error_text.find('\n'), std::string::npos);
  }
  EXPECT_THROW(app.write_panel_png_scaled(PanelId::kLogits, dir.string(), 2), Error);
  EXPECT_THROW(app.write_panel_png_scaled(PanelId::kLogits, "", 2), Error);
  EXPECT_EQ(read_file(file), before);
  EXPECT_EQ(app.controller().snapshot()->history.size(), steps);
  // Every other export writes a well-formed file from the same step.
  for (ExportKind k : {ExportKind::kLogitsSvg, ExportKind::kSamplingSvg, ExportKind::kKvBlocksSvg,
                       ExportKind::kAttentionCsv}) {
    const fs::path p = dir / default_export_name(k, 0);
    EXPECT_TRUE(app.export_to(k, p.string())) << app.state().error_text;
    EXPECT_GT(fs::file_size(p), 100u);
    if (k != ExportKind::kAttentionCsv) {
      const std::vector<std::string> bad = ts::test::bad_paints(read_file(p));
      EXPECT_TRUE(bad.empty()) << export_label(k) << ": attributes that are not colours:\n"
                               << ts::test::paint_report(bad);
    }
  }
  fs::remove_all(dir);
}

// Three lanes sharing the prompt's blocks, two of them sampling with a rule
// that removes tokens.
AppOptions three_lanes(const char* layout) {
  AppOptions o = test::fixture_options(layout, "Once upon a time there was a cat");
  o.compare = {"greedy", "top_k=5,seed=2", "top_p=0.6,temperature=0.9,seed=3"};
  return o;
}

// Loads the model, then the prefill and two decode steps.
void load_and_step_three_times(App& app) {
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i < 3; ++i) {
    app.advance();
    app.settle(2, 100);
  }
}

// Every SVG export of every lane, as a class would make them for slides:
// three lanes sharing the prompt's blocks, two of them sampling with a rule
// that removes tokens, so that each highlighted colour (the chosen token,
// a stage that removed tokens, a shared block, a generated token's label)
// is written. Each fill and stroke must be a colour; the export of a style
// whose colour pointed at a string already gone wrote "8,192 k" there.
TEST(GuiExport, EverySvgOfEveryLaneHasOnlyColours) {
  REQUIRE_DISPLAY();
  App app(three_lanes("lesson"));
  load_and_step_three_times(app);
  ASSERT_EQ(app.controller().snapshot()->lanes.size(), 3u);
  ASSERT_EQ(app.controller().snapshot()->history.size(), 3u);
  const fs::path dir =
      fs::temp_directory_path() / ("ts-export-paint-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int written = 0;
  for (int lane = 0; lane < 3; ++lane) {
    app.state().lane = lane;
    app.settle(3, 100);
    for (ExportKind k : {ExportKind::kAttentionSvg, ExportKind::kLogitsSvg,
                         ExportKind::kSamplingSvg, ExportKind::kKvBlocksSvg}) {
      const fs::path p = dir / ("lane" + std::to_string(lane) + "-" + default_export_name(k, 2));
      ASSERT_TRUE(app.export_to(k, p.string()))
          << export_label(k) << ", lane " << lane << ": " << app.state().error_text;
      const std::vector<std::string> bad = ts::test::bad_paints(read_file(p));
      EXPECT_TRUE(bad.empty()) << export_label(k) << ", lane " << lane
                               << ": attributes that are not colours:\n"
                               << ts::test::paint_report(bad);
      ++written;
    }
  }
  EXPECT_EQ(written, 12);
  fs::remove_all(dir);
}

// The KV cache panel and its SVG draw the same "shared by all" row, and the
// ticks the Attention panel draws under its colour legend are the SVG
// legend's, at the same places along it: each pair comes from one
// computation of the view model, here read back from both sides.
TEST(GuiExport, KvSharedRowAndLegendTicksAreThePanels) {
  REQUIRE_DISPLAY();
  App app(three_lanes("classroom"));
  load_and_step_three_times(app);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kKvCache));
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  const fs::path dir =
      fs::temp_directory_path() / ("ts-export-agree-" + std::to_string(::getpid()));
  fs::create_directories(dir);

  // Three lanes forked from one prefill share the prompt's blocks.
  const size_t shared = app.kv_cache_panel().shared_blocks_drawn();
  ASSERT_GT(shared, 0u);
  const fs::path kv_path = dir / "kv.svg";
  ASSERT_TRUE(app.export_to(ExportKind::kKvBlocksSvg, kv_path.string())) << app.state().error_text;
  const ts::test::ParseResult kv = ts::test::parse_xml(read_file(kv_path));
  ASSERT_TRUE(kv.error.empty()) << kv.error;
  const ts::test::Element* blocks = kv.root->by_id("blocks");
  ASSERT_NE(blocks, nullptr);
  const std::vector<const ts::test::Element*> texts = blocks->all("text");
  ASSERT_GE(texts.size(), 2u);
  EXPECT_EQ(texts[0]->text, "shared by all 3 sequences");
  EXPECT_EQ(
      texts[1]->text.rfind(std::to_string(shared) + (shared == 1 ? " block," : " blocks,"), 0), 0u)
      << texts[1]->text;

  for (HeatScale scale : {HeatScale::kLinear, HeatScale::kLog}) {
    app.state().settings.scale = scale;
    app.settle(2, 100);
    const std::vector<LegendTick>& drawn = app.attention_panel().legend_ticks_drawn();
    ASSERT_GE(drawn.size(), 3u) << "scale " << static_cast<int>(scale);
    const fs::path at_path = dir / "attention.svg";
    ASSERT_TRUE(app.export_to(ExportKind::kAttentionSvg, at_path.string()))
        << app.state().error_text;
    const ts::test::ParseResult at = ts::test::parse_xml(read_file(at_path));
    ASSERT_TRUE(at.error.empty()) << at.error;
    const ts::test::Element* legend = at.root->by_id("legend");
    ASSERT_NE(legend, nullptr);
    const std::vector<const ts::test::Element*> bar = legend->all("rect");
    const std::vector<const ts::test::Element*> lines = legend->all("line");
    const std::vector<const ts::test::Element*> labels = legend->all("text");
    ASSERT_EQ(bar.size(), 1u);
    ASSERT_EQ(lines.size(), labels.size());
    const double lx = std::stod(bar[0]->attr("x")), lw = std::stod(bar[0]->attr("width"));
    ASSERT_GT(lw, 0);
    // Every tick the panel drew is in the SVG, in the same order, at the same fraction.
    size_t next = 0;
    for (const LegendTick& t : drawn) {
      while (next < labels.size() && labels[next]->text != t.label) ++next;
      ASSERT_LT(next, labels.size()) << "the SVG's legend lacks the panel's tick " << t.label;
      const double at_svg = (std::stod(lines[next]->attr("x1")) - lx) / lw;
      EXPECT_NEAR(at_svg, t.position, 1e-3) << t.label;
      ++next;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ts::app
