#!/usr/bin/python3
"""GPT-2 byte-level BPE: trainer, encoder, decoder, and the vocab.json /
merges.txt files in the layout of Hugging Face's GPT-2 download.

    /usr/bin/python3 tools/train/bpe.py train  --input train.txt --vocab-size 8192 --out DIR
    /usr/bin/python3 tools/train/bpe.py encode --model DIR --input X.txt --output X.npy
    /usr/bin/python3 tools/train/bpe.py check  --model DIR --input X.txt   (byte-exact round trip)

The algorithm is GPT-2's:
  * text is split on the special token "<|endoftext|>" first; it is never
    merged with anything and gets the last id;
  * each piece is pre-tokenized with GPT-2's regular expression;
  * the bytes of each pre-token are mapped to printable characters by GPT-2's
    bytes_to_unicode table, so that every token is a printable string;
  * training repeatedly merges the most frequent adjacent pair of symbols,
    counted over pre-tokens weighted by their frequency (pairs never cross
    pre-token boundaries); ties go to the pair whose two strings sort first
    (Python string order), so a run is fully deterministic;
  * encoding merges, inside each pre-token, the adjacent pair with the lowest
    merge rank until no ranked pair is left.

Ids: the 256 byte tokens first, in the order of bytes_to_unicode (as in
GPT-2's encoder.json: "!" is 0), then one id per merge in merge order, then
"<|endoftext|>". A merge whose result string already exists as a token is
never taken (the pair is excluded from then on), so id = 256 + merge rank
holds for every merge, exactly as in GPT-2's own files.
"""
import argparse
import heapq
import json
import os
import sys
from collections import Counter, defaultdict

import regex

EOT = "<|endoftext|>"
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table, as an ordered
    list of (byte, char) pairs: printable Latin-1 bytes map to themselves
    (in this order: 33..126, 161..172, 174..255), the remaining 68 bytes to
    U+0100 onwards in increasing byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


BYTE_ORDER = bytes_to_unicode()
BYTE_ENCODER = dict(BYTE_ORDER)
BYTE_DECODER = {c: b for b, c in BYTE_ORDER}


def split_special(text):
    """Split text around "<|endoftext|>": a list of (is_special, piece)."""
    out = []
    parts = text.split(EOT)
    for i, p in enumerate(parts):
        if i > 0:
            out.append((True, EOT))
        if p:
            out.append((False, p))
    return out


def pretokenize(text):
    return PATTERN.findall(text)


def to_unicode(pretoken):
    return "".join(BYTE_ENCODER[b] for b in pretoken.encode("utf-8"))


# ------------------------------------------------------------- training -----

def count_pretokens(texts):
    """Counter of mapped pre-token strings over an iterable of texts (each may
    contain <|endoftext|>)."""
    counts = Counter()
    for text in texts:
        for special, piece in split_special(text):
            if not special:
                counts.update(pretokenize(piece))
    mapped = Counter()
    for tok, c in counts.items():
        mapped[to_unicode(tok)] += c
    return mapped


def train(pretoken_counts, vocab_size, verbose=False):
    """Learn merges until the vocabulary (bytes + merges + <|endoftext|>)
    holds vocab_size tokens. Returns the list of merges as (a, b) strings."""
    n_merges = vocab_size - 256 - 1
    if n_merges < 0:
        raise ValueError("vocab_size must be at least 257")
    strings = [c for _, c in BYTE_ORDER]       # symbol id -> string
    string_id = {s: i for i, s in enumerate(strings)}

    # Words are lists of symbol ids; sorted so iteration order is fixed.
    items = sorted(pretoken_counts.items())
    words = [[string_id[ch] for ch in w] for w, _ in items]
    freqs = [c for _, c in items]

    pair_count = defaultdict(int)
    where = defaultdict(set)                   # pair -> indices of words holding it
    for wi, w in enumerate(words):
        f = freqs[wi]
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += f
            where[(a, b)].add(wi)

    def entry(pair):
        a, b = pair
        return (-pair_count[pair], strings[a], strings[b], a, b)

    heap = [entry(p) for p, c in pair_count.items() if c > 0]
    heapq.heapify(heap)
    merges = []
    banned = set()
    while len(merges) < n_merges and heap:
        negc, _, _, a, b = heapq.heappop(heap)
        pair = (a, b)
        if pair in banned or pair_count.get(pair, 0) != -negc or negc == 0:
            continue                           # stale heap entry
        new = strings[a] + strings[b]
        if new in string_id:
            banned.add(pair)                   # would duplicate an existing token
            continue
        nid = len(strings)
        strings.append(new)
        string_id[new] = nid
        merges.append((strings[a], strings[b]))
        changed = set()
        for wi in sorted(where.pop(pair, ())):
            w = words[wi]
            f = freqs[wi]
            # Remove this word's old pairs, rewrite it, add its new pairs.
            for p in zip(w, w[1:]):
                pair_count[p] -= f
                changed.add(p)
            out = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(nid)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
            for p in zip(out, out[1:]):
                pair_count[p] += f
                where[p].add(wi)
                changed.add(p)
        pair_count.pop(pair, None)
        changed.discard(pair)
        for p in changed:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, entry(p))
            else:
                pair_count.pop(p, None)
                where.pop(p, None)
        if verbose and len(merges) % 1000 == 0:
            print(f"  {len(merges)} merges, last {merges[-1]!r} count {-negc}", file=sys.stderr)
    if len(merges) < n_merges:
        print(f"warning: only {len(merges)} merges possible", file=sys.stderr)
    return merges


def build_vocab(merges):
    vocab = {}
    for _, c in BYTE_ORDER:
        vocab[c] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    vocab[EOT] = len(vocab)
    return vocab


def save(out_dir, merges):
    os.makedirs(out_dir, exist_ok=True)
    vocab = build_vocab(merges)
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    return vocab


# ------------------------------------------------------------- encoding -----

class Tokenizer:
    def __init__(self, vocab, merges):
        self.encoder = dict(vocab)
        self.decoder = {i: s for s, i in self.encoder.items()}
        self.ranks = {tuple(m): r for r, m in enumerate(merges)}
        self.eot = self.encoder[EOT]
        self.cache = {}

    @classmethod
    def load(cls, model_dir):
        with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        merges = []
        with open(os.path.join(model_dir, "merges.txt"), encoding="utf-8") as f:
            for line in f.read().split("\n"):
                if not line or line.startswith("#version"):
                    continue
                a, b = line.split(" ")
                merges.append((a, b))
        return cls(vocab, merges)

    def bpe(self, word):
        """Mapped pre-token string -> list of token strings."""
        hit = self.cache.get(word)
        if hit is not None:
            return hit
        parts = list(word)
        while len(parts) > 1:
            best, best_rank = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            a, b = parts[best], parts[best + 1]
            out = []
            i = 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        self.cache[word] = parts
        return parts

    def encode(self, text, with_spans=False):
        """text -> ids (and, when asked, the [start, end) byte span of each
        token in text's UTF-8 encoding)."""
        ids, spans = [], []
        pos = 0
        for special, piece in split_special(text):
            if special:
                ids.append(self.eot)
                spans.append((pos, pos + len(EOT)))
                pos += len(EOT)
                continue
            for pt in pretokenize(piece):
                for tok in self.bpe(to_unicode(pt)):
                    ids.append(self.encoder[tok])
                    n = len(tok)  # one mapped char per byte
                    spans.append((pos, pos + n))
                    pos += n
        return (ids, spans) if with_spans else ids

    def decode_bytes(self, ids):
        out = bytearray()
        for i in ids:
            s = self.decoder[i]
            if i == self.eot:
                out += s.encode("utf-8")
            else:
                out += bytes(BYTE_DECODER[c] for c in s)
        return bytes(out)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


# ------------------------------------------------------------------ CLI -----

def main():
    ap = argparse.ArgumentParser(description="GPT-2 byte-level BPE")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--input", required=True)
    t.add_argument("--vocab-size", type=int, default=8192)
    t.add_argument("--out", required=True)
    e = sub.add_parser("encode")
    e.add_argument("--model", required=True)
    e.add_argument("--input", required=True)
    e.add_argument("--output", required=True)
    c = sub.add_parser("check")
    c.add_argument("--model", required=True)
    c.add_argument("--input", required=True)
    args = ap.parse_args()

    if args.cmd == "train":
        with open(args.input, encoding="utf-8") as f:
            text = f.read()
        counts = count_pretokens([text])
        print(f"{len(counts)} distinct pre-tokens, {sum(counts.values())} in all", file=sys.stderr)
        merges = train(counts, args.vocab_size, verbose=True)
        vocab = save(args.out, merges)
        print(f"vocab {len(vocab)} tokens, {len(merges)} merges -> {args.out}", file=sys.stderr)
    elif args.cmd == "encode":
        import numpy as np
        tok = Tokenizer.load(args.model)
        with open(args.input, encoding="utf-8") as f:
            text = f.read()
        ids = tok.encode(text)
        dtype = np.uint16 if len(tok.encoder) <= 65536 else np.int32
        np.save(args.output, np.asarray(ids, dtype=dtype))
        print(f"{args.input}: {len(text)} chars, {len(text.encode('utf-8'))} bytes -> {len(ids)} tokens "
              f"({len(text.encode('utf-8')) / max(1, len(ids)):.2f} bytes/token)", file=sys.stderr)
    elif args.cmd == "check":
        tok = Tokenizer.load(args.model)
        with open(args.input, "rb") as f:
            raw = f.read()
        back = tok.decode_bytes(tok.encode(raw.decode("utf-8")))
        if back != raw:
            print("round trip FAILED", file=sys.stderr)
            sys.exit(1)
        print(f"round trip ok: {len(raw)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
