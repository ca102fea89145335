#pragma once
// Colour maps for heatmaps and the exact CPU twin of shaders/heatmap.frag:
// a weight goes through the scale (linear or log) to a position t in [0, 1],
// then through a 256-entry table with linear interpolation between entries.
// The shader reads the same table (uploaded as a texture) and does the same
// arithmetic, so a test can compare GL's output with colorize() per cell.
// No GL here.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ts::app {

// Colour-blind-safe, perceptually ordered maps first; grey for print.
enum class Colormap { kViridis = 0, kMagma = 1, kGray = 2 };
inline constexpr int kNumColormaps = 3;
const char* colormap_name(Colormap map);
bool parse_colormap(std::string_view name, Colormap& out);

enum class HeatScale { kLinear = 0, kLog = 1 };

struct HeatRange {
  HeatScale scale = HeatScale::kLinear;
  float vmax = 1.0f;        // the top of the scale (attention weights: 1)
  float log_floor = 1e-4f;  // log scale: this value and below map to 0
};

struct Rgb8 {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb8&) const = default;
};

using ColormapTable = std::array<Rgb8, 256>;
const ColormapTable& colormap_table(Colormap map);

// Position on the colour scale of a weight v >= 0 (the shader's heat_position).
float heat_position(float v, const HeatRange& range);
// Colour at position t in [0, 1], interpolated between table entries and
// rounded to 8 bits as a GL_RGBA8 render target rounds.
Rgb8 colormap_at(Colormap map, float t);
// Both steps: what the heatmap shader writes for weight v.
inline Rgb8 colorize(float v, Colormap map, const HeatRange& range) {
  return colormap_at(map, heat_position(v, range));
}

// Cell values with a meaning other than a weight (the shader checks the same).
inline constexpr float kMaskedValue = -1.0f;      // causal mask: a key after the query
inline constexpr float kBackgroundValue = -2.0f;  // not a cell (gaps in thumbnail atlases)

}  // namespace ts::app
