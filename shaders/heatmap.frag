#version 330 core
// Colours a matrix of weights (one float per cell, GL_R32F) for display.
// The render target is the matrix scaled by u_px pixels per cell; pixel row 0
// is matrix row 0 (shown at the top by ImGui::Image with the default UVs).
// Cell values: >= 0 a weight; -1 masked (causal mask, drawn hatched);
// -2 background (transparent). The CPU twin is src/app/colormap.cpp: keep
// heat_position() and colormap_at() identical to it.
uniform sampler2D u_values;   // cols x rows, GL_R32F
uniform sampler2D u_lut;      // 256 x 1, GL_RGBA8
uniform int u_px;             // pixels per cell (>= 1)
uniform int u_down;           // cells per pixel (>= 1; > 1 only with u_px == 1): each pixel
                              // shows the strongest weight of its u_down x u_down block
uniform int u_scale;          // 0 linear, 1 log
uniform float u_vmax;         // top of the scale
uniform float u_log_floor;    // log scale: values at or below map to 0
uniform int u_grid;           // 1: thin lines between cells (when cells are large)
uniform vec4 u_grid_color;
uniform vec4 u_mask_a;        // hatching of masked cells
uniform vec4 u_mask_b;

out vec4 frag_color;

float heat_position(float v) {
  float t;
  if (u_scale == 1) {
    float lo = log2(u_log_floor);
    float hi = log2(u_vmax);
    t = (log2(max(v, u_log_floor)) - lo) / (hi - lo);
  } else {
    t = v / u_vmax;
  }
  return clamp(t, 0.0, 1.0);
}

vec3 colormap_at(float t) {
  float x = clamp(t, 0.0, 1.0) * 255.0;
  int i = min(int(floor(x)), 254);
  float f = x - float(i);
  vec3 a = texelFetch(u_lut, ivec2(i, 0), 0).rgb;
  vec3 b = texelFetch(u_lut, ivec2(i + 1, 0), 0).rgb;
  return a + (b - a) * f;
}

void main() {
  ivec2 pixel = ivec2(gl_FragCoord.xy);
  ivec2 cell = pixel / u_px;
  float v = texelFetch(u_values, cell, 0).r;
  if (u_down > 1) {
    // Larger matrix than pixels: max-pool the block (a lone strong weight
    // stays visible); masked only when every cell of the block is.
    ivec2 size = textureSize(u_values, 0);
    ivec2 first = pixel * u_down;
    v = -2.0;
    for (int dy = 0; dy < u_down; ++dy) {
      for (int dx = 0; dx < u_down; ++dx) {
        ivec2 c = first + ivec2(dx, dy);
        if (c.x >= size.x || c.y >= size.y) continue;
        float w = texelFetch(u_values, c, 0).r;
        v = max(v, w);
      }
    }
  }
  if (v < -1.5) {
    frag_color = vec4(0.0);
    return;
  }
  ivec2 inner = pixel - cell * u_px;
  bool line = u_grid == 1 && u_px >= 8 && (inner.x == u_px - 1 || inner.y == u_px - 1);
  if (line) {
    frag_color = u_grid_color;
    return;
  }
  if (v < 0.0) {
    // Diagonal stripes, fixed in screen pixels so they read as "masked" at any size.
    int stripe = ((pixel.x + pixel.y) / 4) % 2;
    frag_color = stripe == 0 ? u_mask_a : u_mask_b;
    return;
  }
  frag_color = vec4(colormap_at(heat_position(v)), 1.0);
}
