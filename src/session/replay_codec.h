#pragma once
// The packed arrays of a session file's replay data: base64 of little-endian
// float32 (logits, exact) or IEEE half floats (attention weights, see
// session_import.h for why half precision is enough). Used by the export
// (session_export.cpp) and the import (session_import.cpp).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/half_float.h"

namespace ts::replay {

inline std::string base64_encode(const uint8_t* data, size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const uint32_t v = uint32_t(data[i]) << 16 | uint32_t(data[i + 1]) << 8 | data[i + 2];
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (size - i == 1) {
    const uint32_t v = uint32_t(data[i]) << 16;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (size - i == 2) {
    const uint32_t v = uint32_t(data[i]) << 16 | uint32_t(data[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// Strict: length a multiple of 4, padding only at the end, no other
// characters. The result is never larger than the text (3/4 of it), so a
// file cannot make this allocate more than it holds. nullopt when malformed.
inline std::optional<std::vector<uint8_t>> base64_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[k] = value(c);
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t bits = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | v[3];
    out.push_back(uint8_t(bits >> 16));
    if (pad < 2) out.push_back(uint8_t(bits >> 8));
    if (pad < 1) out.push_back(uint8_t(bits));
  }
  return out;
}

inline std::string pack_f32(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t b = float_to_bits(values[i]);
    for (int k = 0; k < 4; ++k) bytes[i * 4 + k] = uint8_t(b >> (8 * k));
  }
  return base64_encode(bytes.data(), bytes.size());
}

inline std::string pack_f16(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = fp32_to_fp16(values[i]);
    bytes[i * 2] = uint8_t(h);
    bytes[i * 2 + 1] = uint8_t(h >> 8);
  }
  return base64_encode(bytes.data(), bytes.size());
}

// nullopt when the text is not base64 or does not hold exactly `count` values.
inline std::optional<std::vector<float>> unpack_f32(std::string_view text, size_t count) {
  if (text.size() / 4 * 3 / 4 + 1 < count) return std::nullopt;  // too short to hold them
  const auto bytes = base64_decode(text);
  if (!bytes || bytes->size() != count * 4) return std::nullopt;
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t b = 0;
    for (int k = 0; k < 4; ++k) b |= uint32_t((*bytes)[i * 4 + k]) << (8 * k);
    out[i] = bits_to_float(b);
  }
  return out;
}

inline std::optional<std::vector<float>> unpack_f16(std::string_view text, size_t count) {
  if (text.size() / 4 * 3 / 2 + 1 < count) return std::nullopt;
  const auto bytes = base64_decode(text);
  if (!bytes || bytes->size() != count * 2) return std::nullopt;
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i)
    out[i] = fp16_to_fp32(uint16_t((*bytes)[i * 2] | (*bytes)[i * 2 + 1] << 8));
  return out;
}

}  // namespace ts::replay
