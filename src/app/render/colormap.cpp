#include "app/render/colormap.h"

#include <algorithm>
#include <cmath>

namespace ts::app {

namespace {

// Nine evenly spaced published samples of each map (position 0, 1/8, ..., 1);
// the 256-entry tables interpolate between them.
constexpr uint32_t kViridisStops[9] = {0x440154, 0x472D7B, 0x3B528B, 0x2C728E, 0x21908C,
                                       0x27AD81, 0x5DC863, 0xAADC32, 0xFDE725};
constexpr uint32_t kMagmaStops[9] = {0x000004, 0x1D1147, 0x51127C, 0x822681, 0xB63679,
                                     0xE65164, 0xFB8861, 0xFEC287, 0xFCFDBF};

ColormapTable build_from_stops(const uint32_t (&stops)[9]) {
  ColormapTable t{};
  for (int i = 0; i < 256; ++i) {
    const double x = i / 255.0 * 8.0;
    const int k = std::min(7, static_cast<int>(x));
    const double f = x - k;
    auto channel = [&](int shift) {
      const double a = (stops[k] >> shift) & 0xFF;
      const double b = (stops[k + 1] >> shift) & 0xFF;
      return static_cast<uint8_t>(std::lround(a + (b - a) * f));
    };
    t[i] = Rgb8{channel(16), channel(8), channel(0)};
  }
  return t;
}

ColormapTable build_gray() {
  ColormapTable t{};
  for (int i = 0; i < 256; ++i) {
    // From near-black to near-white so that 0 stays visible on a dark theme.
    const auto v = static_cast<uint8_t>(std::lround(20 + (245 - 20) * (i / 255.0)));
    t[i] = Rgb8{v, v, v};
  }
  return t;
}

}  // namespace

const char* colormap_name(Colormap map) {
  switch (map) {
    case Colormap::kViridis:
      return "viridis";
    case Colormap::kMagma:
      return "magma";
    case Colormap::kGray:
      return "grey";
  }
  return "?";
}

bool parse_colormap(std::string_view name, Colormap& out) {
  for (int i = 0; i < kNumColormaps; ++i)
    if (name == colormap_name(static_cast<Colormap>(i))) {
      out = static_cast<Colormap>(i);
      return true;
    }
  if (name == "gray") {
    out = Colormap::kGray;
    return true;
  }
  return false;
}

const ColormapTable& colormap_table(Colormap map) {
  static const ColormapTable viridis = build_from_stops(kViridisStops);
  static const ColormapTable magma = build_from_stops(kMagmaStops);
  static const ColormapTable gray = build_gray();
  switch (map) {
    case Colormap::kMagma:
      return magma;
    case Colormap::kGray:
      return gray;
    case Colormap::kViridis:
      break;
  }
  return viridis;
}

// Keep in step with heat_position() in shaders/heatmap.frag.
float heat_position(float v, const HeatRange& range) {
  float t;
  if (range.scale == HeatScale::kLog) {
    const float lo = std::log2(range.log_floor);
    const float hi = std::log2(range.vmax);
    t = (std::log2(std::max(v, range.log_floor)) - lo) / (hi - lo);
  } else {
    t = v / range.vmax;
  }
  return std::clamp(t, 0.0f, 1.0f);
}

// Keep in step with colormap_at() in shaders/heatmap.frag.
Rgb8 colormap_at(Colormap map, float t) {
  const ColormapTable& table = colormap_table(map);
  const float x = std::clamp(t, 0.0f, 1.0f) * 255.0f;
  const int i = std::min(static_cast<int>(std::floor(x)), 254);
  const float f = x - static_cast<float>(i);
  auto mix = [&](uint8_t a, uint8_t b) {
    const float fa = a / 255.0f, fb = b / 255.0f;
    const float c = fa + (fb - fa) * f;
    return static_cast<uint8_t>(std::lround(std::clamp(c, 0.0f, 1.0f) * 255.0f));
  };
  return Rgb8{mix(table[i].r, table[i + 1].r), mix(table[i].g, table[i + 1].g),
              mix(table[i].b, table[i + 1].b)};
}

}  // namespace ts::app
