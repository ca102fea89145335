#include "app/help_text.h"

namespace ts::app {

const char* panel_help(PanelId id) {
  switch (id) {
    case PanelId::kPrompt:
      return "The prompt is cut into tokens by GPT-2's byte-level BPE tokenizer. Each chip is "
             "one token: its text on top (a space shows as \u2423, a newline as \u21B5) and its "
             "id in the vocabulary below.\n\nBlue chips are the prompt, orange chips were "
             "generated. The dashed chip is the token the last step chose: it is not in the KV "
             "cache yet; the next decode step feeds it through the model.\n\nClick a chip to see "
             "what that token attends to in the Attention panel.";
    case PanelId::kTransport:
      return "Prefill runs the whole prompt through the model in one parallel pass and fills the "
             "KV cache. Then the model pauses.\n\nEach decode step feeds one token (the one "
             "chosen last), reads the keys and values of every earlier token from the cache, "
             "appends its own, and produces logits for the next token.\n\nKeys: Space = prefill "
             "/ step, \u2192 or Page Down = step, \u2190 or Page Up = step back (what a "
             "presentation clicker sends). Run steps on its own at the chosen speed.";
    case PanelId::kAttention:
      return "Attention weights of one layer and head: row = the query token (the token "
             "being processed), column = the key token it looks at. Each row sums to 1.\n\n"
             "Hatched cells are masked: a token may not look at tokens that come after it "
             "(causal mask). After prefill every prompt row is there at once; each decode "
             "step adds one new row at the bottom (outlined).\n\nThe small grid shows every "
             "layer \u00D7 head; click one to show it. 'avg' averages the heads of a layer. A log "
             "scale makes small weights visible.";
    case PanelId::kKvCache:
      return "The KV cache keeps each token's keys and values so that a decode step does not "
             "recompute them. It is paged: memory is handed out in fixed-size blocks, and each "
             "lane has a block table listing its blocks in order.\n\nOrange slots were written "
             "by the step you are looking at: prefill writes the whole prompt at once, a "
             "decode step one slot per lane. Blocks shared by several lanes show their "
             "reference count.";
    case PanelId::kLogits:
      return "The model's output for the next position: one score (logit) per token of the "
             "vocabulary. Softmax turns logits into probabilities that sum to 1.\n\n"
             "Entropy measures how unsure the model is: 0 nats = certain; e^entropy is the "
             "number of equally likely tokens that would be as uncertain. The small plot shows "
             "every token of the vocabulary ranked by probability.";
    case PanelId::kSampling:
      return "How the decoding strategy turns the logits into one token, stage by stage "
             "(Hugging Face order): repetition penalty, temperature, top-k, top-p, min-p, then "
             "the draw. Greyed tokens were removed by that stage.\n\nGreedy takes the most "
             "likely token. Sampling draws a random number u in [0, 1) from the seed and picks "
             "the token where the cumulative probability passes u.\n\nChanging a control "
             "re-chooses the newest step's token from the same logits: same logits, different "
             "token.";
    case PanelId::kTimeline:
      return "Each step's measured wall time and its analytic cost: FLOPs (arithmetic) and "
             "bytes that must move from memory (the weights, the KV cache read and "
             "written).\n\nFLOPs per byte is the arithmetic intensity. Prefill processes many "
             "tokens per weight read (high intensity: compute bound); decode processes one "
             "token per lane (low intensity: memory bound). Click a bar to look at that step.";
    case PanelId::kRoofline:
      return "The roofline: how fast a step could possibly run on this machine. x = "
             "arithmetic intensity (FLOPs per byte moved from memory, from the step's analytic "
             "cost); y = achieved FLOP/s (FLOPs over the measured wall time). The roof is the "
             "lower of two limits measured at start-up: memory bandwidth x intensity (the "
             "slope) and peak compute (the flat top).\n\nDecode reads every weight to "
             "process one token per lane, so it sits far left, under the slope: memory bound. "
             "Prefill reuses each weight for every prompt token and moves right, towards the "
             "compute roof. More lanes share one weight read, so their decode steps move "
             "right too.";
    case PanelId::kLogitLens:
      return "The logit lens reads the model's mind layer by layer: the residual stream after "
             "each block goes through the final layer norm and the unembedding, as if the "
             "model stopped there. Each row lists the five tokens that partial model would "
             "predict next, with their probabilities.\n\nThe last row is the model's real "
             "output. Watch where the final answer first appears, and how sure each layer is.";
    case PanelId::kCacheCompare:
      return "Why the KV cache exists, measured: the same prompt and strategy generate N "
             "tokens twice on this machine, once with the cache (each decode step feeds one "
             "token) and once without (each step feeds the whole sequence again, as a naive "
             "loop does).\n\nThe tokens and logits must be the same both ways: the cache only "
             "avoids recomputing keys and values that do not change. The cost is not the same: "
             "without the cache every step redoes all earlier tokens, so the work grows with "
             "the square of the length.";
    case PanelId::kLanes:
      return "Several decoding strategies over the same prompt. The prompt is processed once "
             "(one prefill); every lane forks its KV cache sequence, so the prompt's blocks are "
             "shared, and each decode step feeds one token per lane in a single batched "
             "forward pass: the weights are read once for all lanes.\n\nEach column shows a "
             "lane's text, each step's token with the model's probability of it, and a summary: "
             "log p (how likely the model finds the text), perplexity, distinct 2-grams "
             "(repetition) and speed, and how each lane chose at the step shown (\"chosen by\"). "
             "The highlighted row is where the lanes first choose differently.\n\nBeam search "
             "keeps the num_beams most likely sequences; its tree "
             "shows the beams kept, finished and pruned at every step. Click a token in the "
             "Logits panel to branch a new lane with that token at the viewed step.";
    case PanelId::kHelp:
      return "Short explanations of prefill, decode, the KV cache and each decoding strategy.";
    case PanelId::kStatusBar:
      return "The backend and device that compute, the model, and any error.";
  }
  return "";
}

const HelpTopic& help_topic(int index) {
  static const HelpTopic topics[kNumHelpTopics] = {
      {"Keys",
       "Space: prefill (first) or one decode step.  \u2192: one decode step.  \u2190: step back "
       "(undo the last step).  F11: presentation mode (large fonts for a projector).\n"
       "Click a token chip to select it as the attention query; click a bar in the timeline "
       "to look at an earlier step."},
      {"Prefill",
       "The prompt's tokens go through the model together, in one pass. Every layer computes "
       "keys and values for all prompt tokens at once (matrix \u00D7 matrix products, which "
       "keeps the processor busy) and stores them in the KV cache. The pass ends with logits "
       "for the token after the prompt."},
      {"Decode",
       "One new token per step and per lane. The step feeds the token chosen last, computes "
       "its query, key and value, reads every earlier key and value from the cache, and "
       "appends its own. The weights are read once for a single token (matrix \u00D7 vector): "
       "memory bound, so a step costs about the time to stream the weights."},
      {"KV cache",
       "Attention needs the keys and values of every earlier token. Recomputing them every "
       "step would grow with the square of the length; the cache keeps them instead. "
       "TokenScope's cache is paged: fixed-size blocks, a block table per sequence, and "
       "reference counts so lanes can share the prompt's blocks."},
      {"Logits and softmax",
       "The last layer gives one number per vocabulary token: the logit. "
       "p_i = exp(z_i) / \u03A3 exp(z_j) turns them into probabilities. Only differences between "
       "logits matter."},
      {"Greedy",
       "Always take the most likely token (the argmax). Deterministic; often repetitive."},
      {"Temperature",
       "Divide the logits by T before the softmax. T < 1 sharpens the distribution (more "
       "predictable), T > 1 flattens it (more surprising). T applies only when sampling."},
      {"Top-k", "Keep only the k most likely tokens, then renormalise. k = 0 is off."},
      {"Top-p (nucleus)",
       "Keep the smallest set of most likely tokens whose probabilities add up to at least p; "
       "remove the rest. p = 1 is off."},
      {"Min-p",
       "Keep tokens whose probability is at least min-p \u00D7 the top token's probability. "
       "Adapts to how confident the model is. 0 is off."},
      {"Repetition penalty",
       "Tokens already in the text get their logit divided by the penalty (multiplied when "
       "negative), making repeats less likely. 1 is off. Applies to greedy too."},
      {"Seed and the draw",
       "Sampling draws a number u in [0, 1) from the seed and the step number, lines the kept "
       "tokens up by probability, and picks the token whose cumulative probability first "
       "passes u. Same seed, same tokens, every run."},
  };
  return topics[index < 0 || index >= kNumHelpTopics ? 0 : index];
}

}  // namespace ts::app
