#pragma once
// KV cache: tokens, bytes and blocks used / shared / free; each lane's block
// table as a row of blocks with their slots (the slots the viewed step wrote
// highlighted); the physical block pool; and the cache size over the steps.
#include "app/panel.h"

namespace ts::app {

class KvCachePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

 private:
  void draw_legend(PanelContext& ctx);
  void draw_lane_blocks(PanelContext& ctx, const KvOccupancy& kv);
  void draw_pool(PanelContext& ctx, const KvOccupancy& kv, float height);
  void draw_chart(PanelContext& ctx, float height);
};

}  // namespace ts::app
