#include "app/panels/help_text.h"

namespace ts::app {

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
      {"Speculative decoding",
       "A small draft model proposes \u03B3 tokens, one cheap pass each. The big target "
       "model then checks all of them in ONE verify pass over \u03B3 + 1 positions. A decode "
       "step is memory bound (it streams every weight to process one token), so feeding "
       "\u03B3 + 1 tokens reads the same weights once and costs about one decode step.\n"
       "Greedy: a draft token is accepted when it is the target's own argmax at its row; the "
       "first one that is not is replaced by the target's argmax (the correction) and the "
       "drafts after it are never checked. All accepted: the last row gives one more token "
       "for free (the bonus).\n"
       "Sampled: draft token x is accepted when u < p(x) / q(x) (p: the target's probability, "
       "q: the draft's, u uniform in [0, 1)), so always when p \u2265 q. At the first rejection "
       "the token is drawn from the residual norm(max(0, p \u2212 q)): the probability the "
       "target has and the draft did not already take. Accepted drafts plus residual draws "
       "give exactly the target's distribution, so the text is as if the target alone had "
       "sampled it; only the speed depends on how often the draft agrees (the acceptance "
       "rate). Every round makes at least one token per target pass, at most \u03B3 + 1."},
  };
  return topics[index < 0 || index >= kNumHelpTopics ? 0 : index];
}

}  // namespace ts::app
